//! The spend store at scale, against SQLite and PostgreSQL: day partitions made on demand (an
//! import's old days), replays still skipped on the partitioned key, retention (old rows gone,
//! newer kept, whole days dropped on PostgreSQL, rollups kept), the rollups answering exactly
//! what summing the log answers (on each store, and the two stores against each other), and
//! migration 0017 over a database that already has spend logs.

use std::borrow::Cow;

use time::macros::datetime;
use time::{Duration, OffsetDateTime};

use super::testing::{every_backend, postgres_database, postgres_server};
use super::*;

const DAY0: OffsetDateTime = datetime!(2026-03-01 00:00 UTC);

/// 240 requests over four days, every 24 minutes from day 0's midnight: three keys over two
/// teams, users and end users (some none), five tag sets (one with a tag twice), one failure
/// in seven, spend and tokens varying.
fn varied() -> Vec<SpendLog> {
    let keys = [
        KeyHash::of("sk-a"),
        KeyHash::of("sk-b"),
        KeyHash::of("sk-c"),
    ];
    let tags: [&[&str]; 5] = [
        &[],
        &["prod"],
        &["prod", "search"],
        &["eval", "eval"],
        &["search"],
    ];
    (0..240)
        .map(|i| {
            let at = DAY0 + Duration::minutes(24 * i as i64);
            let mut l = SpendLog::new(format!("v{i:03}"), ["gpt-4o", "claude"][i % 2].into(), at);
            l.id = format!("varied-{i:03}");
            if i % 4 != 3 {
                l.api_key = Some(keys[i % 3].clone());
                l.team_id = Some(["t1", "t2"][i % 3 % 2].into());
            }
            l.user_id = (i % 5 != 0).then(|| format!("u{}", i % 4));
            l.end_user = (i % 6 != 0).then(|| format!("c{}", i % 9));
            l.request_tags = tags[i % 5].iter().map(|t| (*t).to_owned()).collect();
            l.usage.prompt_tokens = 10 + i as u64 % 13;
            l.usage.completion_tokens = 3 + i as u64 % 5;
            l.spend = 0.001 * (1 + i % 11) as f64;
            if i % 7 == 0 {
                l.status = SpendStatus::Failure;
            }
            l
        })
        .collect()
}

/// Every sum the spend pages read, over `first..first + days` (whole days), by section
/// (`Team`, ..., `tags`, `tags, every day`): as the store's public reads answer (from the
/// rollups), then as summing the log answers. Rows print their spend to 1e-9 USD and are
/// sorted by name: groups whose spend is equal up to float rounding may come in either order.
async fn sums(
    s: &Store,
    first: OffsetDateTime,
    days: i64,
) -> Vec<(String, Vec<String>, Vec<String>)> {
    let end = first + Duration::days(days);
    let groups = |g: Vec<GroupSpend>| -> Vec<String> {
        let mut v: Vec<String> = g
            .iter()
            .map(|g| {
                format!(
                    "{} {} {:.9} {}",
                    g.name, g.requests, g.spend, g.total_tokens
                )
            })
            .collect();
        v.sort();
        v
    };
    let tags = |t: Vec<TagSpend>| -> Vec<String> {
        let mut v: Vec<String> = t
            .iter()
            .map(|t| {
                format!(
                    "{} {} {:.9} {} {:?} {:?}",
                    t.tag, t.requests, t.spend, t.total_tokens, t.first_seen, t.last_seen
                )
            })
            .collect();
        v.sort();
        v
    };
    let mut out = Vec::new();
    for by in [
        SpendBy::Team,
        SpendBy::Model,
        SpendBy::Key,
        SpendBy::User,
        SpendBy::EndUser,
    ] {
        out.push((
            format!("{by:?}"),
            groups(s.spend_grouped(first, end, by).await.unwrap()),
            groups(s.spend_grouped_logs(first, end, by).await.unwrap()),
        ));
    }
    out.push((
        "tags".into(),
        tags(s.spend_by_tag(Some(first), Some(end)).await.unwrap()),
        tags(s.spend_by_tag_logs(Some(first), Some(end)).await.unwrap()),
    ));
    out.push((
        "tags, every day".into(),
        tags(s.spend_by_tag(None, None).await.unwrap()),
        tags(s.spend_by_tag_logs(None, None).await.unwrap()),
    ));
    out
}

#[tokio::test]
async fn rollups_answer_what_summing_the_log_answers_on_both_stores() {
    let mut answers = Vec::new();
    for db in every_backend().await {
        let s = &db.store;
        let logs = varied();
        // In three batches, the second written twice (a replay adds nothing).
        s.write_spend_batch(&logs[..100]).await.unwrap();
        s.write_spend_batch(&logs[100..170]).await.unwrap();
        let again = s.write_spend_batch(&logs[100..170]).await.unwrap();
        assert_eq!(again.inserted, 0, "{:?}", s.backend());
        s.import_spend_batch(&logs[170..]).await.unwrap();
        let mut both = Vec::new();
        for (first, days) in [(DAY0, 4), (DAY0 + Duration::days(1), 2), (DAY0, 1)] {
            for (section, fast, slow) in sums(s, first, days).await {
                assert_eq!(
                    fast,
                    slow,
                    "{:?} {section} from {first} for {days} days",
                    s.backend()
                );
                assert!(!fast.is_empty(), "{section}");
                both.push(fast);
            }
        }
        // A range that is not whole days is summed from the log, to the millisecond.
        let from = DAY0 + Duration::hours(5);
        let part = s
            .spend_grouped(from, from + Duration::hours(3), SpendBy::User)
            .await
            .unwrap();
        assert_eq!(part.iter().map(|g| g.requests).sum::<u64>(), 7);
        answers.push(both);
    }
    if let [sqlite, postgres] = &answers[..] {
        assert_eq!(sqlite, postgres, "SQLite and PostgreSQL disagree");
    }
}

async fn count(s: &Store) -> i64 {
    let row = sqlx::query("SELECT COUNT(*) AS n FROM spend_logs")
        .fetch_one(s.pool())
        .await
        .unwrap();
    col(&row, "n").unwrap()
}

#[tokio::test]
async fn an_import_of_old_days_makes_their_partitions_and_replays_are_skipped() {
    for db in every_backend().await {
        let s = &db.store;
        // Days far apart, in one batch: 2019, and the test's March.
        let mut logs = varied();
        logs[0].start_time = datetime!(2019-06-30 23:59:59.999 UTC);
        let out = s.import_spend_batch(&logs).await.unwrap();
        assert_eq!(out.inserted, 240);
        let again = s.import_spend_batch(&logs).await.unwrap();
        assert_eq!((again.inserted, again.duplicates), (0, 240));
        assert_eq!(count(s).await, 240);
        let parts = s.spend_partitions().await.unwrap();
        if s.backend() == Backend::Postgres {
            let names: Vec<&str> = parts.iter().map(|p| p.name.as_str()).collect();
            assert_eq!(
                names,
                [
                    "spend_logs_20190630",
                    "spend_logs_20260301",
                    "spend_logs_20260302",
                    "spend_logs_20260303",
                    "spend_logs_20260304"
                ]
            );
            // Another store (another instance) knows none of them, and finds them.
            let other = Store::open(StoreOptions::new(Location::Postgres(
                sluice_core::Secret::new(pg_url(s).await),
            )))
            .await
            .unwrap();
            let mut late = SpendLog::new("late".into(), "gpt-4o".into(), DAY0);
            late.id = "late".into();
            other.write_spend_batch(&[late]).await.unwrap();
            assert_eq!(count(s).await, 241);
            assert_eq!(s.spend_partitions().await.unwrap().len(), 5);
        } else {
            assert!(parts.is_empty());
        }
        // A lookup by id finds the row in its day.
        let one = s
            .spend_logs(&SpendLogFilter {
                id: Some("varied-000".into()),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(one.len(), 1);
        assert_eq!(one[0].start_time, datetime!(2019-06-30 23:59:59.999 UTC));
    }
}

/// The URL of the database a PostgreSQL store is on.
async fn pg_url(s: &Store) -> String {
    let row = sqlx::query("SELECT CAST(current_database() AS TEXT) AS db")
        .fetch_one(s.pool())
        .await
        .unwrap();
    let db: String = col(&row, "db").unwrap();
    let server = postgres_server().unwrap();
    let (base, _) = server.rsplit_once('/').unwrap();
    format!("{base}/{db}")
}

#[tokio::test]
async fn retention_removes_older_rows_keeps_newer_and_keeps_the_rollups() {
    for db in every_backend().await {
        let s = &db.store;
        s.write_spend_batch(&varied()).await.unwrap();
        let rollup_before = s
            .spend_grouped(DAY0, DAY0 + Duration::days(4), SpendBy::Model)
            .await
            .unwrap();
        // Days 0 and 1 go whole; on day 2, the rows before 06:00 go too on SQLite (an exact
        // cut), while PostgreSQL, given the same time, drops whole days only and deletes the
        // rest of the rows before it in batches.
        let cutoff = DAY0 + Duration::days(2) + Duration::hours(6);
        let pruned = s.prune_spend_logs(cutoff, 1_000).await.unwrap();
        let left = s
            .spend_logs(&SpendLogFilter {
                page: Page {
                    offset: 0,
                    limit: 1_000,
                },
                ..Default::default()
            })
            .await
            .unwrap();
        assert!(
            left.iter().all(|l| l.start_time >= cutoff),
            "{:?}",
            s.backend()
        );
        // 60 a day; day 2's first 15 (00:00 .. 05:36) are before the cut.
        assert_eq!(left.len(), 240 - 120 - 15, "{:?}", s.backend());
        assert_eq!(
            left.last().map(|l| l.start_time),
            Some(DAY0 + Duration::days(2) + Duration::hours(6))
        );
        match s.backend() {
            Backend::Postgres => {
                assert_eq!((pruned.partitions, pruned.rows), (2, 15));
                let names: Vec<String> = s
                    .spend_partitions()
                    .await
                    .unwrap()
                    .into_iter()
                    .map(|p| p.name)
                    .collect();
                assert_eq!(names, ["spend_logs_20260303", "spend_logs_20260304"]);
            }
            Backend::Sqlite => assert_eq!((pruned.partitions, pruned.rows), (0, 135)),
        }
        assert!(!pruned.more);
        // A row budget smaller than what is due: some left, said so.
        let later = DAY0 + Duration::days(2) + Duration::hours(12);
        let pruned = s.prune_spend_logs(later, 10).await.unwrap();
        assert!(pruned.more && pruned.rows == 10, "{pruned:?}");
        // The rollups still have every day.
        let rollup_after = s
            .spend_grouped(DAY0, DAY0 + Duration::days(4), SpendBy::Model)
            .await
            .unwrap();
        assert_eq!(rollup_before, rollup_after);
        // New rows on a dropped day's date make its partition again.
        let mut back = SpendLog::new("back".into(), "gpt-4o".into(), DAY0);
        back.id = "back".into();
        s.write_spend_batch(&[back]).await.unwrap();
    }
}

#[tokio::test]
async fn the_writer_runs_retention_and_makes_the_next_days() {
    for db in every_backend().await {
        let s = &db.store;
        let now = OffsetDateTime::now_utc();
        let mut old = SpendLog::new("old".into(), "gpt-4o".into(), now - Duration::days(10));
        old.id = "old".into();
        let mut new = SpendLog::new("new".into(), "gpt-4o".into(), now - Duration::hours(1));
        new.id = "new".into();
        s.write_spend_batch(&[old, new]).await.unwrap();
        let dir = testing::temp_dir();
        let mut o = WriterOptions::new(dir.join("spool.jsonl"));
        o.batch_interval = std::time::Duration::from_millis(10);
        o.maintenance_every = std::time::Duration::from_millis(20);
        o.retention = Some(std::time::Duration::from_secs(7 * 86_400));
        let (sender, task) = writer::start(s.clone(), o).unwrap();
        let mut gone = false;
        for _ in 0..200 {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            if count(s).await == 1 {
                gone = true;
                break;
            }
        }
        drop(sender);
        task.await.unwrap();
        assert!(gone, "{:?}: the old row is still there", s.backend());
        let left = s.spend_logs(&SpendLogFilter::default()).await.unwrap();
        assert_eq!(left.len(), 1);
        assert_eq!(left[0].id, "new");
        if s.backend() == Backend::Postgres {
            let today = partitions::day_of(to_ms(now));
            let days: Vec<i64> = s
                .spend_partitions()
                .await
                .unwrap()
                .iter()
                .filter_map(|p| p.from.map(partitions::day_of))
                .collect();
            for d in today..=today + 3 {
                assert!(days.contains(&d), "day {d} not made ahead: {days:?}");
            }
        }
        let _ = std::fs::remove_dir_all(dir);
    }
}

/// Rows written by a schema before 0017 (PostgreSQL: into the unpartitioned table), then the
/// rest of the migrations.
async fn migrate_over_old_rows(pool: &sqlx::AnyPool, backend: Backend) {
    let all = match backend {
        Backend::Sqlite => sqlx::migrate!("./migrations/sqlite"),
        Backend::Postgres => sqlx::migrate!("./migrations/postgres"),
    };
    let before = sqlx::migrate::Migrator {
        migrations: Cow::Owned(
            all.migrations
                .iter()
                .filter(|m| m.version < 17)
                .cloned()
                .collect(),
        ),
        ..sqlx::migrate::Migrator::DEFAULT
    };
    before.run(pool).await.unwrap();
    for (i, l) in varied().iter().enumerate() {
        sqlx::query(
            "INSERT INTO spend_logs (id, request_id, api_key, team_id, user_id, end_user, \
             model_group, prompt_tokens, completion_tokens, cached_tokens, \
             cache_creation_tokens, reasoning_tokens, spend, status, start_time, end_time, \
             request_tags) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 0, 0, 0, $10, $11, $12, $12, $13)",
        )
        .bind(l.id.clone())
        .bind(l.request_id.clone())
        .bind(l.api_key.as_ref().map(|k| k.as_str().to_owned()))
        .bind(l.team_id.clone())
        .bind(l.user_id.clone())
        .bind(l.end_user.clone())
        .bind(l.model_group.clone())
        .bind(i64::try_from(l.usage.prompt_tokens).unwrap())
        .bind(i64::try_from(l.usage.completion_tokens).unwrap())
        .bind(l.spend)
        .bind(l.status.as_str())
        .bind(to_ms(l.start_time))
        .bind(serde_json::to_string(&l.request_tags).unwrap())
        .execute(pool)
        .await
        .unwrap_or_else(|e| panic!("row {i}: {e}"));
    }
    all.run(pool).await.unwrap();
}

#[tokio::test]
async fn migration_0017_keeps_the_rows_already_stored_and_rolls_them_up() {
    let mut stores = Vec::new();
    let dir = testing::temp_dir();
    let file = dir.join("sluice.db");
    sqlx::any::install_default_drivers();
    let pool = sqlx::AnyPool::connect(&format!("sqlite://{}?mode=rwc", file.display()))
        .await
        .unwrap();
    migrate_over_old_rows(&pool, Backend::Sqlite).await;
    pool.close().await;
    stores.push(
        Store::open(StoreOptions::new(Location::Sqlite(file)))
            .await
            .unwrap(),
    );
    if let Some(server) = postgres_server() {
        let url = postgres_database(&server).await;
        let pool = sqlx::AnyPool::connect(&url).await.unwrap();
        migrate_over_old_rows(&pool, Backend::Postgres).await;
        pool.close().await;
        stores.push(
            Store::open(StoreOptions::new(Location::Postgres(
                sluice_core::Secret::new(url),
            )))
            .await
            .unwrap(),
        );
    }
    for s in &stores {
        assert_eq!(count(s).await, 240);
        // What 0017 rolls up from the rows already there (`daily_spend`, by key, team and
        // model, was kept by every batch before it; these rows were inserted bare).
        for (section, fast, slow) in sums(s, DAY0, 4).await {
            if !["Team", "Model", "Key"].contains(&section.as_str()) {
                assert_eq!(fast, slow, "{:?} {section}", s.backend());
                assert!(!fast.is_empty(), "{section}");
            }
        }
        if s.backend() == Backend::Postgres {
            let parts = s.spend_partitions().await.unwrap();
            assert_eq!(parts.len(), 1, "{parts:?}");
            assert_eq!(parts[0].name, "spend_logs_legacy");
            assert_eq!(parts[0].from, None);
            let end = parts[0].to.unwrap();
            assert_eq!(end % partitions::DAY_MS, 0);
            assert!(end > to_ms(OffsetDateTime::now_utc()));
        }
        // New rows (tomorrow's go to a day of their own on PostgreSQL) and a replay of an old
        // one, which the legacy rows' new key still recognises.
        let mut tomorrow = SpendLog::new(
            "t".into(),
            "gpt-4o".into(),
            OffsetDateTime::now_utc() + Duration::days(1),
        );
        tomorrow.id = "tomorrow".into();
        let out = s
            .write_spend_batch(&[tomorrow, varied().remove(5)])
            .await
            .unwrap();
        assert_eq!((out.inserted, out.duplicates), (1, 1), "{:?}", s.backend());
        // Retention empties the legacy table in batches where it spans the cutoff.
        let pruned = s
            .prune_spend_logs(DAY0 + Duration::days(2), 1_000)
            .await
            .unwrap();
        assert_eq!(
            (pruned.partitions, pruned.rows),
            (0, 120),
            "{:?}",
            s.backend()
        );
        assert_eq!(count(s).await, 121);
    }
    let _ = std::fs::remove_dir_all(dir);
}

/// Pages read newest day first, then wider (PostgreSQL), are the pages the whole log gives:
/// rows over 60 days back from now, denser lately, read with and without a cursor, an end,
/// an offset, a filter and by id, against the same read as one query.
#[tokio::test]
async fn pages_read_newest_days_first_are_the_whole_logs_pages() {
    let now = OffsetDateTime::now_utc();
    let logs: Vec<SpendLog> = (0..300)
        .map(|i| {
            // Every 30 minutes for the newest 100, then every 14 hours back to ~116 days.
            let back = if i < 100 {
                Duration::minutes(30 * i)
            } else {
                Duration::hours(50 + 14 * (i - 100))
            };
            let mut l = SpendLog::new(format!("w{i:03}"), "gpt-4o".into(), now - back);
            l.id = format!("wide-{i:03}");
            l.team_id = Some(["a", "b", "c"][i as usize % 3].into());
            l
        })
        .collect();
    for db in every_backend().await {
        let s = &db.store;
        s.write_spend_batch(&logs).await.unwrap();
        let position = |i: usize| LogPosition::of(&logs[i]);
        let page = |limit: u64, offset: u64| Page { offset, limit };
        let cases = [
            SpendLogFilter {
                page: page(20, 0),
                ..Default::default()
            },
            SpendLogFilter {
                page: page(150, 0),
                ..Default::default()
            },
            SpendLogFilter {
                page: page(1_000, 0),
                ..Default::default()
            },
            SpendLogFilter {
                page: page(30, 90),
                ..Default::default()
            },
            SpendLogFilter {
                cursor: Some(Cursor::Before(position(95))),
                page: page(40, 0),
                ..Default::default()
            },
            SpendLogFilter {
                cursor: Some(Cursor::Before(position(250))),
                page: page(40, 0),
                ..Default::default()
            },
            SpendLogFilter {
                cursor: Some(Cursor::After(position(120))),
                page: page(40, 0),
                ..Default::default()
            },
            SpendLogFilter {
                end: Some(now - Duration::days(20)),
                page: page(25, 0),
                ..Default::default()
            },
            SpendLogFilter {
                team_id: Some("b".into()),
                page: page(60, 0),
                ..Default::default()
            },
            SpendLogFilter {
                id: Some("wide-290".into()),
                ..Default::default()
            },
            SpendLogFilter {
                id: Some("wide-003".into()),
                ..Default::default()
            },
            SpendLogFilter {
                id: Some("none".into()),
                ..Default::default()
            },
        ];
        for f in &cases {
            let ids = |v: Vec<SpendLog>| v.into_iter().map(|l| l.id).collect::<Vec<_>>();
            let paged = ids(s.spend_logs(f).await.unwrap());
            let whole = ids(s.read_logs(f).await.unwrap());
            assert_eq!(paged, whole, "{:?} {f:?}", s.backend());
        }
        assert_eq!(
            s.spend_logs(&cases[0]).await.unwrap().len(),
            20,
            "a full first page"
        );
    }
}

/// Floats of every kind a cost can be: sums that need all 17 digits, tiny and huge ones,
/// whole numbers, subnormals, and a spread from a fixed pseudo-random sequence.
fn awkward_floats() -> Vec<f64> {
    let mut v = vec![
        0.0,
        0.1 + 0.2,
        1.0 / 3.0,
        0.000_015,
        1.5e-7,
        2e-6,
        123_456.789,
        1.0,
        250.0,
        1e21,
        1e300,
        f64::MIN_POSITIVE,
        5e-324,
        -0.000_1,
    ];
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in 0..400 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // A mantissa of all 52 bits, scaled from 1e-9 up to ~1e6.
        let m = 1.0 + (x >> 12) as f64 / (1u64 << 52) as f64;
        v.push(m * 10f64.powi(i % 16 - 9));
    }
    v
}

/// Every column of a spend log comes back from `spend_logs` (one JSON text built by the
/// database) exactly as written, on both stores: NULLs, costs to the last bit, millisecond
/// times, JSON-valued columns (tags, attempts) and text that JSON has to escape; the prompt and
/// answer only when asked for.
#[tokio::test]
async fn spend_logs_read_back_every_column_exactly_on_both_stores() {
    let floats = awkward_floats();
    let mut logs: Vec<SpendLog> = Vec::new();
    // A bare record: every optional column NULL.
    let mut bare = SpendLog::new("bare".into(), "m".into(), DAY0);
    bare.id = "exact-bare".into();
    logs.push(bare);
    // A record with every column set, in text JSON must escape.
    let odd = "quote \" backslash \\ slash / newline \n tab \t nul-ish \u{1} é 雪 🚀 </script>";
    let mut full = SpendLog::new(
        format!("req {odd}"),
        "gpt-4o".into(),
        DAY0 + Duration::milliseconds(1_234),
    );
    full.id = "exact-full".into();
    full.api_key = Some(KeyHash::of("sk-exact"));
    full.team_id = Some(format!("team {odd}"));
    full.user_id = Some("user-1".into());
    full.end_user = Some("customer-1".into());
    full.deployment_id = Some("dep-1".into());
    full.provider = Some("openai".into());
    full.usage.prompt_tokens = 1_000_000_007;
    full.usage.completion_tokens = 5;
    full.usage.cached_tokens = 6;
    full.usage.cache_creation_tokens = 7;
    full.usage.reasoning_tokens = 8;
    full.spend = 0.1 + 0.2;
    full.status = SpendStatus::Failure;
    full.end_time = full.start_time + Duration::milliseconds(987);
    full.ttfb_ms = Some(12);
    full.cache_hit = true;
    full.saved_spend = 1.0 / 3.0;
    full.requested_model = Some("gpt-4".into());
    full.overhead_us = Some(345);
    full.retries = 1;
    full.fallbacks = 2;
    full.hedges = 3;
    full.attempts = vec![
        AttemptLog {
            deployment: "dep-0".into(),
            model_group: "gpt-4".into(),
            provider: "azure".into(),
            hedge: false,
            start_us: 10,
            duration_us: Some(20),
            result: "rate_limited".into(),
            status: Some(429),
            message: Some(odd.into()),
        },
        AttemptLog {
            deployment: "dep-1".into(),
            model_group: "gpt-4o".into(),
            provider: "openai".into(),
            hedge: true,
            start_us: 30,
            duration_us: None,
            result: "ok".into(),
            status: None,
            message: None,
        },
    ];
    full.messages = Some(format!(
        r#"[{{"role":"user","content":{}}}]"#,
        serde_json::json!(odd)
    ));
    full.response = Some(format!("cut at the cap {odd}"));
    full.call_type = Some("call_mcp_tool".into());
    full.error = Some("429 rpm_limit_exceeded".into());
    full.http_status = Some(429);
    full.error_type = Some("rate_limit_error".into());
    full.error_message = Some(odd.into());
    full.request_tags = vec!["prod".into(), odd.into(), "prod".into()];
    logs.push(full);
    // A row per awkward float, as spend and as saved spend, one millisecond apart.
    for (i, f) in floats.iter().enumerate() {
        let at = DAY0 + Duration::seconds(10) + Duration::milliseconds(i as i64);
        let mut l = SpendLog::new(format!("float-{i}"), "m".into(), at);
        l.id = format!("exact-float-{i:04}");
        l.spend = *f;
        l.saved_spend = floats[floats.len() - 1 - i];
        logs.push(l);
    }
    // Newest first, ties in the millisecond by id.
    let mut expected = logs.clone();
    expected.sort_by(|a, b| (b.start_time, &b.id).cmp(&(a.start_time, &a.id)));
    for db in every_backend().await {
        let s = &db.store;
        let name = format!("{:?}", s.backend());
        s.write_spend_batch(&logs).await.unwrap();
        let all = |content: bool| SpendLogFilter {
            content,
            page: Page {
                offset: 0,
                limit: 10_000,
            },
            ..SpendLogFilter::default()
        };
        let read = s.read_logs(&all(true)).await.unwrap();
        assert_eq!(read.len(), expected.len(), "{name}");
        for (got, want) in read.iter().zip(&expected) {
            assert_eq!(got, want, "{name}");
            // PartialEq on f64 calls 0.0 and -0.0 equal: the bits too.
            assert_eq!(
                got.spend.to_bits(),
                want.spend.to_bits(),
                "{name} {}",
                want.id
            );
            assert_eq!(
                got.saved_spend.to_bits(),
                want.saved_spend.to_bits(),
                "{name} {}",
                want.id
            );
        }
        // A list leaves the prompt and answer out; the rest is the same.
        let listed = s.spend_logs(&all(false)).await.unwrap();
        let without: Vec<SpendLog> = expected
            .iter()
            .cloned()
            .map(|mut l| {
                l.messages = None;
                l.response = None;
                l
            })
            .collect();
        assert_eq!(listed, without, "{name}");
        // The page after a row, and nothing at all, read the same way.
        let after = s
            .spend_logs(&SpendLogFilter {
                cursor: Some(Cursor::After(LogPosition::of(&expected[3]))),
                page: Page {
                    offset: 0,
                    limit: 2,
                },
                ..SpendLogFilter::default()
            })
            .await
            .unwrap();
        assert_eq!(after, without[1..3], "{name}");
        let none = s
            .spend_logs(&SpendLogFilter {
                request_id: Some("no such request".into()),
                ..SpendLogFilter::default()
            })
            .await
            .unwrap();
        assert!(none.is_empty(), "{name}");
    }
}
