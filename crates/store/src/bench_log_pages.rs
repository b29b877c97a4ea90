//! How long the console's logs page waits for the store at scale: an ignored test that fills a
//! spend log with a million rows (batched writes, as the spend writer makes them) and times
//! the page's reads on SQLite and PostgreSQL: the first page and a deep one (by keyset), with
//! and without filters, the names of a page's keys and teams, and for comparison the same deep
//! page by OFFSET. `bench/console-logs.sh` runs it (and times the page itself over HTTP);
//! docs/console.md has the figures.
//!
//! `cargo test --release -p sluice-store bench_log_pages -- --ignored --nocapture`, with
//! `SLUICE_BENCH_ROWS` (default 1,000,000) and, to keep the databases for the HTTP half,
//! `SLUICE_BENCH_KEEP=<dir>` (the SQLite file goes there, the PostgreSQL URL is printed).

use std::time::{Duration, Instant};

use time::macros::datetime;
use time::OffsetDateTime;

use super::testing;
use super::*;

const T0: OffsetDateTime = datetime!(2026-01-01 00:00 UTC);
/// Rows per batch written (one transaction each).
const BATCH: usize = 10_000;
/// Rows a page of the console reads (200, and one more to know whether there is a next).
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

/// Row `i`'s start: 0.8 s apart, every seventh in the same millisecond as the one before.
fn start_of(i: usize) -> OffsetDateTime {
    let step = i - i / 7;
    T0 + Duration::from_millis(step as u64 * 800)
}

fn key_of(i: usize) -> KeyRow {
    let mut k = KeyRow::new(&format!("sk-bench-key-{i:04}"), T0);
    k.key_alias = Some(format!("app-{i:02}"));
    k.team_id = Some(format!("team-{:02}", i % TEAMS));
    k
}

/// Row `i`: key `i % 50` (and its team), model group `i % 5`, one failure in 101.
fn row(i: usize, keys: &[KeyRow]) -> SpendLog {
    let key = &keys[i % KEYS];
    let mut l = SpendLog::new(
        format!("req-{i:07}"),
        MODELS[i % MODELS.len()].into(),
        start_of(i),
    );
    l.id = format!("{i:08x}-bench");
    l.api_key = Some(key.token.clone());
    l.team_id = key.team_id.clone();
    l.user_id = Some(format!("user-{:02}", i % 20));
    l.end_user = Some(format!("customer-{:03}", i % 300));
    l.deployment_id = Some(format!("dep-{}", i % 7));
    l.provider = Some("openai".into());
    l.usage.prompt_tokens = 100 + (i % 50) as u64;
    l.usage.completion_tokens = 20 + (i % 30) as u64;
    l.spend = 0.0001 * (1 + i % 9) as f64;
    l.end_time = l.start_time + Duration::from_millis(200 + (i % 500) as u64);
    if i % 101 == 0 {
        l.status = SpendStatus::Failure;
        l.error = Some("429 rpm_limit_exceeded".into());
        l.http_status = Some(429);
        l.error_type = Some("rate_limit_error".into());
        l.error_message = Some("key requests-per-minute limit of 60 reached".into());
    } else {
        l.http_status = Some(200);
    }
    l
}

async fn fill(s: &Store, rows: usize) -> Duration {
    let keys: Vec<KeyRow> = (0..KEYS).map(key_of).collect();
    for k in &keys {
        s.create_key(k).await.unwrap();
    }
    for t in 0..TEAMS {
        let mut team = TeamRow::new(format!("team-{t:02}"), T0);
        team.team_alias = Some(format!("Team {t}"));
        s.create_team(&team).await.unwrap();
    }
    let started = Instant::now();
    let mut batch = Vec::with_capacity(BATCH);
    for i in 0..rows {
        batch.push(row(i, &keys));
        if batch.len() == BATCH || i + 1 == rows {
            s.import_spend_batch(&batch).await.unwrap();
            batch.clear();
        }
    }
    started.elapsed()
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

/// The position of the row `n` rows from the newest, for a deep page.
fn deep(rows: usize, n: usize) -> Cursor {
    let i = rows - 1 - n;
    let keys: Vec<KeyRow> = (0..KEYS).map(key_of).collect();
    Cursor::Before(LogPosition::of(&row(i, &keys)))
}

async fn measure(s: &Store, rows: usize) {
    let page = |cursor: Option<Cursor>, f: SpendLogFilter| SpendLogFilter {
        cursor,
        page: Page {
            offset: 0,
            limit: PAGE,
        },
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
    let day = || SpendLogFilter {
        start: Some(start_of(rows / 2)),
        end: Some(start_of(rows / 2) + Duration::from_secs(86_400)),
        ..Default::default()
    };
    let model_failed = || SpendLogFilter {
        model_group: Some("claude-sonnet".into()),
        status: Some(SpendStatus::Failure),
        ..Default::default()
    };
    let nothing = || SpendLogFilter {
        team_id: Some("team-03".into()),
        model_group: Some("embed".into()),
        ..Default::default()
    };
    // A deep page: 90 % of the way down the log (or of the filter's rows).
    let far = rows * 9 / 10;
    let cases: Vec<(&str, SpendLogFilter)> = vec![
        (
            "first page, no filter",
            page(None, SpendLogFilter::default()),
        ),
        (
            "deep page (90 %), no filter",
            page(Some(deep(rows, far)), SpendLogFilter::default()),
        ),
        ("first page, team", page(None, team())),
        // Team 03's rows are every tenth; the cursor 90 % down is one of theirs or near it.
        (
            "deep page (90 %), team",
            page(Some(deep(rows, far)), team()),
        ),
        ("first page, failures", page(None, failed())),
        (
            "deep page (90 %), failures",
            page(Some(deep(rows, far)), failed()),
        ),
        ("first page, key alias", page(None, alias())),
        (
            "deep page (90 %), key alias",
            page(Some(deep(rows, far)), alias()),
        ),
        ("first page, one day's range", page(None, day())),
        (
            "first page, model group and failures",
            page(None, model_failed()),
        ),
        // Team 03's keys call one model group only: no row matches, and every row of the
        // narrower index is read to say so (the worst case of a filter).
        (
            "no match: team and another model group",
            page(None, nothing()),
        ),
    ];
    println!("| {:?} read | median ms | slowest ms | rows |", s.backend());
    println!("| --- | ---: | ---: | ---: |");
    for (name, f) in &cases {
        let n = s.spend_logs(f).await.unwrap().len();
        let (median, max) = time(|| s.spend_logs(f)).await;
        println!("| {name} | {} | {} | {n} |", ms(median), ms(max));
    }
    let offset = SpendLogFilter {
        page: Page {
            offset: far as u64,
            limit: PAGE,
        },
        ..Default::default()
    };
    let (median, max) = time(|| s.spend_logs(&offset)).await;
    println!(
        "| deep page (90 %) by OFFSET, for comparison | {} | {} | {PAGE} |",
        ms(median),
        ms(max)
    );
    // The names of a page's keys and teams: one read.
    let listed = s.spend_logs(&cases[0].1).await.unwrap();
    let keys: Vec<&str> = listed
        .iter()
        .filter_map(|l| l.api_key.as_ref().map(KeyHash::as_str))
        .collect();
    let teams: Vec<&str> = listed.iter().filter_map(|l| l.team_id.as_deref()).collect();
    let named = Named {
        keys: &keys,
        teams: &teams,
        users: &[],
    };
    let (median, max) = time(|| s.names(named)).await;
    println!(
        "| names of a page's keys and teams | {} | {} | {} |",
        ms(median),
        ms(max),
        listed.len()
    );
}

fn rows_wanted() -> usize {
    std::env::var("SLUICE_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000_000)
}

#[tokio::test]
#[ignore = "fills a million rows: minutes; bench/console-logs.sh runs it"]
async fn bench_log_pages_sqlite() {
    let rows = rows_wanted();
    let keep = std::env::var_os("SLUICE_BENCH_KEEP").map(std::path::PathBuf::from);
    let (store, _db) = match &keep {
        Some(dir) => {
            std::fs::create_dir_all(dir).unwrap();
            let path = dir.join("sluice.db");
            let _ = std::fs::remove_file(&path);
            let opts = StoreOptions::new(Location::Sqlite(path));
            (Store::open(opts).await.unwrap(), None)
        }
        None => {
            let db = testing::sqlite().await;
            (db.store.clone(), Some(db))
        }
    };
    let took = fill(&store, rows).await;
    println!("SQLite: {rows} rows written in {:.1} s", took.as_secs_f64());
    measure(&store, rows).await;
}

#[tokio::test]
#[ignore = "fills a million rows: minutes; bench/console-logs.sh runs it"]
async fn bench_log_pages_postgres() {
    let Some(server) = testing::postgres_server() else {
        return;
    };
    let rows = rows_wanted();
    let url = testing::postgres_database(&server).await;
    let store = Store::open(StoreOptions::new(Location::Postgres(
        sluice_core::Secret::new(url.clone()),
    )))
    .await
    .unwrap();
    let took = fill(&store, rows).await;
    sqlx::query("ANALYZE spend_logs")
        .execute(store.pool())
        .await
        .unwrap();
    println!(
        "PostgreSQL: {rows} rows written in {:.1} s",
        took.as_secs_f64()
    );
    measure(&store, rows).await;
    if std::env::var_os("SLUICE_BENCH_KEEP").is_some() {
        println!("PostgreSQL database kept: {url}");
    } else {
        store.close().await;
        let (base, name) = url.rsplit_once('/').unwrap();
        let _ = base;
        let mut admin = <sqlx::AnyConnection as sqlx::Connection>::connect(&server)
            .await
            .unwrap();
        sqlx::Executor::execute(&mut admin, format!("DROP DATABASE {name}").as_str())
            .await
            .unwrap();
    }
}
