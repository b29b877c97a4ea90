//! The same bodies run against SQLite and PostgreSQL (see `testing::every_backend`).

use time::macros::datetime;
use time::OffsetDateTime;

use super::keys::KeyFilter;
use super::spend_logs::BatchOutcome;
use super::testing::every_backend;
use super::*;
use sluice_core::usage::Usage;

const T0: OffsetDateTime = datetime!(2026-03-01 10:00 UTC);

fn log(key: &KeyRow, spend: f64, at: OffsetDateTime) -> SpendLog {
    let mut l = SpendLog::new("req-1".into(), "gpt-4o".into(), at);
    l.api_key = Some(key.token.clone());
    l.team_id = key.team_id.clone();
    l.user_id = key.user_id.clone();
    l.usage = Usage {
        prompt_tokens: 100,
        completion_tokens: 20,
        cached_tokens: 40,
        cache_creation_tokens: 10,
        reasoning_tokens: 5,
        ..Usage::default()
    };
    l.spend = spend;
    l.end_time = at + time::Duration::milliseconds(350);
    l.ttfb_ms = Some(120);
    l
}

#[tokio::test]
async fn key_crud_round_trips_every_field() {
    for db in every_backend().await {
        let s = &db.store;
        let mut key = KeyRow::new("sk-test-one", T0);
        key.key_alias = Some("app-one".into());
        key.expires = Some(datetime!(2026-12-31 00:00 UTC));
        key.team_id = Some("t1".into());
        key.user_id = Some("u1".into());
        key.limits = Limits {
            models: vec!["gpt-4o".into(), "claude".into()],
            max_budget: Some(12.5),
            budget_duration: Some("30d".parse().unwrap()),
            budget_reset_at: None,
            rpm_limit: Some(60),
            tpm_limit: Some(100_000),
            max_parallel_requests: Some(4),
            metadata: serde_json::json!({"owner": "ops", "n": 1})
                .as_object()
                .cloned()
                .unwrap(),
            budget_id: Some("b1".into()),
        };
        key.organization_id = Some("o1".into());
        key.limits.schedule(T0);
        assert_eq!(
            key.limits.budget_reset_at,
            Some(datetime!(2026-03-31 10:00 UTC))
        );
        s.create_key(&key).await.unwrap();

        let got = s.key(&KeyHash::of("sk-test-one")).await.unwrap().unwrap();
        assert_eq!(got, key, "{:?}", s.backend());
        assert_eq!(s.key_by_alias("app-one").await.unwrap(), Some(key.clone()));

        // Same alias again: a conflict, not a database error.
        let mut dup = KeyRow::new("sk-test-two", T0);
        dup.key_alias = Some("app-one".into());
        assert!(matches!(
            s.create_key(&dup).await,
            Err(StoreError::Conflict("key"))
        ));

        // Update everything but spend; spend written elsewhere survives the update.
        s.write_spend_batch(&[log(&key, 0.25, T0)]).await.unwrap();
        let mut edited = got.clone();
        edited.blocked = true;
        edited.limits.rpm_limit = None;
        edited.limits.models.clear();
        edited.accounting.updated_at = T0 + time::Duration::hours(1);
        edited.accounting.spend = 999.0;
        s.update_key(&edited).await.unwrap();
        let after = s.key(&key.token).await.unwrap().unwrap();
        assert!(after.blocked);
        assert_eq!(after.limits.rpm_limit, None);
        assert!(after.limits.models.is_empty());
        assert_eq!(after.accounting.spend, 0.25);
        assert_eq!(after.accounting.created_at, T0);

        // Regenerate: new hash, same row.
        let new = s.rehash_key(&key.token, "sk-test-new", T0).await.unwrap();
        assert_eq!(s.key(&key.token).await.unwrap(), None);
        let moved = s.key(&new).await.unwrap().unwrap();
        assert_eq!(
            (moved.key_alias.as_deref(), moved.accounting.spend),
            (Some("app-one"), 0.25)
        );
        assert_eq!(moved.key_name, "sk-...-new");

        // Lists and filters.
        let mut other = KeyRow::new("sk-test-three", T0);
        other.team_id = Some("t2".into());
        s.create_key(&other).await.unwrap();
        assert_eq!(
            s.list_keys(KeyFilter::All, Page::default())
                .await
                .unwrap()
                .len(),
            2
        );
        let t2 = s
            .list_keys(KeyFilter::Team("t2"), Page::default())
            .await
            .unwrap();
        assert_eq!(t2, vec![other.clone()]);
        assert_eq!(
            s.list_keys(KeyFilter::User("u1"), Page::default())
                .await
                .unwrap()
                .len(),
            1
        );
        let one = Page {
            offset: 1,
            limit: 1,
        };
        assert_eq!(s.list_keys(KeyFilter::All, one).await.unwrap().len(), 1);

        s.delete_key(&other.token, T0).await.unwrap();
        assert!(matches!(
            s.delete_key(&other.token, T0).await,
            Err(StoreError::NotFound("key"))
        ));
        assert!(matches!(
            s.update_key(&other).await,
            Err(StoreError::NotFound("key"))
        ));
    }
}

#[tokio::test]
async fn teams_and_users_crud() {
    for db in every_backend().await {
        let s = &db.store;
        let mut team = TeamRow::new("team-a".into(), T0);
        team.team_alias = Some("Team A".into());
        team.limits.max_budget = Some(100.0);
        team.limits.tpm_limit = Some(5000);
        s.create_team(&team).await.unwrap();
        assert_eq!(s.team("team-a").await.unwrap(), Some(team.clone()));
        assert!(matches!(
            s.create_team(&team).await,
            Err(StoreError::Conflict("team"))
        ));
        team.blocked = true;
        s.update_team(&team).await.unwrap();
        assert!(s.team("team-a").await.unwrap().unwrap().blocked);

        let mut user = UserRow::new("u-1".into(), T0);
        user.user_email = Some("a@example.com".into());
        user.user_role = Some("internal_user".into());
        user.team_id = Some("team-a".into());
        user.limits.max_parallel_requests = Some(2);
        s.create_user(&user).await.unwrap();
        assert_eq!(s.user("u-1").await.unwrap(), Some(user.clone()));
        assert_eq!(s.list_users(Page::default()).await.unwrap(), vec![user]);
        assert_eq!(s.list_teams(Page::default()).await.unwrap().len(), 1);
        s.delete_user("u-1").await.unwrap();
        s.delete_team("team-a").await.unwrap();
        assert_eq!(s.user("u-1").await.unwrap(), None);
        assert!(matches!(
            s.delete_team("team-a").await,
            Err(StoreError::NotFound("team"))
        ));
        assert!(s.ping().await);
    }
}

#[tokio::test]
async fn spend_batches_count_once_and_roll_up() {
    for db in every_backend().await {
        let s = &db.store;
        let mut key = KeyRow::new("sk-spender", T0);
        key.team_id = Some("team-s".into());
        key.user_id = Some("user-s".into());
        s.create_key(&key).await.unwrap();
        s.create_team(&TeamRow::new("team-s".into(), T0))
            .await
            .unwrap();
        s.create_user(&UserRow::new("user-s".into(), T0))
            .await
            .unwrap();

        // 450 records: more than one INSERT statement's worth, over two days.
        let mut logs: Vec<SpendLog> = (0..450)
            .map(|i| log(&key, 0.001, T0 + time::Duration::minutes(i * 5)))
            .collect();
        logs[7].status = SpendStatus::Failure;
        logs[8].api_key = None;
        logs[8].team_id = None;
        logs[8].user_id = None;
        let out = s.write_spend_batch(&logs).await.unwrap();
        assert_eq!(
            out,
            BatchOutcome {
                inserted: 450,
                duplicates: 0
            }
        );

        // The same batch again (a replay): nothing counted twice.
        let again = s.write_spend_batch(&logs[..300]).await.unwrap();
        assert_eq!(
            again,
            BatchOutcome {
                inserted: 0,
                duplicates: 300
            }
        );

        let expect = 449.0 * 0.001;
        let k = s.key(&key.token).await.unwrap().unwrap();
        assert!(
            (k.accounting.spend - expect).abs() < 1e-9,
            "{}",
            k.accounting.spend
        );
        let t = s.team("team-s").await.unwrap().unwrap();
        assert!((t.accounting.spend - expect).abs() < 1e-9);
        let u = s.user("user-s").await.unwrap().unwrap();
        assert!((u.accounting.spend - expect).abs() < 1e-9);

        let days = s.daily_spend("2026-03-01", "2026-03-31").await.unwrap();
        let total: u64 = days.iter().map(|d| d.requests).sum();
        assert_eq!(total, 450);
        // 10:00 + 5 min steps: 168 records on the 1st, 282 on the 2nd (one without a key).
        let first: Vec<_> = days.iter().filter(|d| d.day == "2026-03-01").collect();
        assert_eq!(first.iter().map(|d| d.requests).sum::<u64>(), 168);
        let keyed = days
            .iter()
            .find(|d| d.day == "2026-03-01" && d.api_key == key.token.as_str())
            .unwrap();
        assert_eq!(keyed.failed_requests, 1);
        assert_eq!(keyed.cached_tokens, 40 * keyed.requests);
        assert_eq!(keyed.cache_creation_tokens, 10 * keyed.requests);
        assert_eq!(keyed.team_id, "team-s");
        assert!(days.iter().any(|d| d.api_key.is_empty() && d.requests == 1));

        let page = s
            .spend_logs(&SpendLogFilter {
                api_key: Some(key.token.clone()),
                page: Page {
                    offset: 0,
                    limit: 3,
                },
                ..SpendLogFilter::default()
            })
            .await
            .unwrap();
        assert_eq!(page.len(), 3);
        assert!(page[0].start_time >= page[1].start_time);
        let newest = logs
            .iter()
            .filter(|l| l.api_key.is_some())
            .max_by_key(|l| l.start_time);
        assert_eq!(Some(&page[0]), newest);
    }
}

#[tokio::test]
async fn budget_reset_zeroes_spend_and_schedules_next_window() {
    for db in every_backend().await {
        let s = &db.store;
        let mut key = KeyRow::new("sk-budget", T0);
        key.limits.budget_duration = Some("1d".parse().unwrap());
        key.limits.max_budget = Some(1.0);
        key.limits.schedule(T0);
        s.create_key(&key).await.unwrap();
        let mut plain = KeyRow::new("sk-no-window", T0);
        plain.limits.max_budget = Some(1.0);
        s.create_key(&plain).await.unwrap();
        s.write_spend_batch(&[log(&key, 0.75, T0), log(&plain, 0.5, T0)])
            .await
            .unwrap();

        // Not due yet.
        assert_eq!(
            s.reset_budgets(T0 + time::Duration::hours(23))
                .await
                .unwrap(),
            0
        );
        // Two and a half days later: one reset, next window aligned to the first.
        let now = T0 + time::Duration::hours(60);
        assert_eq!(s.reset_budgets(now).await.unwrap(), 1);
        let k = s.key(&key.token).await.unwrap().unwrap();
        assert_eq!(k.accounting.spend, 0.0);
        assert_eq!(
            k.limits.budget_reset_at,
            Some(datetime!(2026-03-04 10:00 UTC))
        );
        assert_eq!(
            s.key(&plain.token).await.unwrap().unwrap().accounting.spend,
            0.5
        );
        assert_eq!(s.reset_budgets(now).await.unwrap(), 0);
    }
}

#[tokio::test]
async fn changed_since_reports_edits_resets_and_removals() {
    for db in every_backend().await {
        let s = &db.store;
        let t1 = T0 + time::Duration::seconds(1);
        let mut kept = KeyRow::new("sk-kept", T0);
        kept.limits.budget_duration = Some("1h".parse().unwrap());
        kept.limits.schedule(T0);
        s.create_key(&kept).await.unwrap();
        let gone = KeyRow::new("sk-gone", T0);
        s.create_key(&gone).await.unwrap();
        let renewed = KeyRow::new("sk-renewed", T0);
        s.create_key(&renewed).await.unwrap();
        s.create_team(&TeamRow::new("t-old".into(), T0))
            .await
            .unwrap();
        assert!(s.changed_since(t1).await.unwrap().is_empty());

        // An edit, a delete, a regenerate, a new team, a budget reset.
        let mut blocked = gone.clone();
        blocked.blocked = true;
        blocked.accounting.updated_at = t1 + time::Duration::seconds(1);
        s.update_key(&blocked).await.unwrap();
        s.delete_key(&gone.token, t1 + time::Duration::seconds(2))
            .await
            .unwrap();
        let new = s
            .rehash_key(
                &renewed.token,
                "sk-renewed-2",
                t1 + time::Duration::seconds(3),
            )
            .await
            .unwrap();
        s.create_team(&TeamRow::new(
            "t-new".into(),
            t1 + time::Duration::seconds(4),
        ))
        .await
        .unwrap();
        let reset_at = T0 + time::Duration::minutes(90);
        assert_eq!(s.reset_budgets(reset_at).await.unwrap(), 1);

        let c = s.changed_since(t1).await.unwrap();
        let mut tokens: Vec<&KeyHash> = c.keys.iter().map(|k| &k.token).collect();
        tokens.sort_by_key(|t| t.as_str());
        let mut expect = vec![&kept.token, &new];
        expect.sort_by_key(|t| t.as_str());
        assert_eq!(tokens, expect, "{:?}", s.backend());
        let mut deleted = c.deleted_keys.clone();
        deleted.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        let mut expect_deleted = vec![gone.token.clone(), renewed.token.clone()];
        expect_deleted.sort_by(|a, b| a.as_str().cmp(b.as_str()));
        assert_eq!(deleted, expect_deleted);
        assert_eq!(
            c.teams
                .iter()
                .map(|t| t.team_id.as_str())
                .collect::<Vec<_>>(),
            ["t-new"]
        );
        assert_eq!(c.watermark, reset_at);
        assert!(s.changed_since(c.watermark).await.unwrap().is_empty());
    }
}

#[tokio::test]
async fn end_users_get_spend_without_an_admin_call() {
    for db in every_backend().await {
        let s = &db.store;
        let mut capped = EndUserRow::new("customer-1".into(), T0);
        capped.limits.max_budget = Some(2.0);
        s.create_end_user(&capped).await.unwrap();
        let key = KeyRow::new("sk-eu", T0);
        s.create_key(&key).await.unwrap();
        let mut a = log(&key, 0.5, T0);
        a.end_user = Some("customer-1".into());
        let mut b = log(&key, 0.25, T0);
        b.end_user = Some("customer-2".into());
        let mut c = log(&key, 0.25, T0);
        c.end_user = Some("customer-1".into());
        s.write_spend_batch(&[a, b, c]).await.unwrap();
        let one = s.end_user("customer-1").await.unwrap().unwrap();
        assert_eq!(one.accounting.spend, 0.75);
        assert_eq!(one.limits.max_budget, Some(2.0));
        let two = s.end_user("customer-2").await.unwrap().unwrap();
        assert_eq!((two.accounting.spend, two.limits.max_budget), (0.25, None));
        assert_eq!(s.list_end_users(Page::default()).await.unwrap().len(), 2);
        s.delete_end_user("customer-2").await.unwrap();
        assert_eq!(s.end_user("customer-2").await.unwrap(), None);
    }
}

#[tokio::test]
async fn spend_log_filters() {
    for db in every_backend().await {
        let s = &db.store;
        let mut k1 = KeyRow::new("sk-f1", T0);
        k1.user_id = Some("alice".into());
        let k2 = KeyRow::new("sk-f2", T0);
        let mut logs = Vec::new();
        for i in 0..6 {
            let key = if i % 2 == 0 { &k1 } else { &k2 };
            let mut l = log(key, 0.01, T0 + time::Duration::hours(i));
            l.request_id = format!("req-{i}");
            logs.push(l);
        }
        s.write_spend_batch(&logs).await.unwrap();
        let ids = |v: Vec<SpendLog>| v.into_iter().map(|l| l.request_id).collect::<Vec<_>>();
        let f = |f: SpendLogFilter| async move { ids(s.spend_logs(&f).await.unwrap()) };
        assert_eq!(
            f(SpendLogFilter {
                api_key: Some(k2.token.clone()),
                ..Default::default()
            })
            .await,
            ["req-5", "req-3", "req-1"]
        );
        assert_eq!(
            f(SpendLogFilter {
                user_id: Some("alice".into()),
                start: Some(T0 + time::Duration::hours(1)),
                end: Some(T0 + time::Duration::hours(4)),
                ..Default::default()
            })
            .await,
            ["req-2"]
        );
        assert_eq!(
            f(SpendLogFilter {
                request_id: Some("req-4".into()),
                ..Default::default()
            })
            .await,
            ["req-4"]
        );
        assert_eq!(f(SpendLogFilter::default()).await.len(), 6);
    }
}

#[tokio::test]
async fn spend_logs_filter_by_team_model_status_and_alias_in_sql() {
    for db in every_backend().await {
        let s = &db.store;
        let mut k1 = KeyRow::new("sk-g1", T0);
        k1.key_alias = Some("app-one".into());
        k1.team_id = Some("search".into());
        s.create_key(&k1).await.unwrap();
        let k2 = KeyRow::new("sk-g2", T0);
        let mut logs = Vec::new();
        for i in 0..6 {
            let key = if i % 2 == 0 { &k1 } else { &k2 };
            let mut l = log(key, 0.01, T0 + time::Duration::hours(i));
            l.request_id = format!("req-{i}");
            if i >= 3 {
                l.model_group = "claude".into();
            }
            if i == 4 {
                l.status = SpendStatus::Failure;
            }
            logs.push(l);
        }
        s.write_spend_batch(&logs).await.unwrap();
        let ids = |v: Vec<SpendLog>| v.into_iter().map(|l| l.request_id).collect::<Vec<_>>();
        let f = |f: SpendLogFilter| async move { ids(s.spend_logs(&f).await.unwrap()) };
        let alias = SpendLogFilter {
            key_alias: Some("app-one".into()),
            ..Default::default()
        };
        assert_eq!(f(alias).await, ["req-4", "req-2", "req-0"]);
        let team_model = SpendLogFilter {
            team_id: Some("search".into()),
            model_group: Some("claude".into()),
            ..Default::default()
        };
        assert_eq!(f(team_model).await, ["req-4"]);
        let failed = SpendLogFilter {
            status: Some(SpendStatus::Failure),
            ..Default::default()
        };
        assert_eq!(f(failed).await, ["req-4"]);
        let ok_claude = SpendLogFilter {
            status: Some(SpendStatus::Success),
            model_group: Some("claude".into()),
            ..Default::default()
        };
        assert_eq!(f(ok_claude).await, ["req-5", "req-3"]);
        let none = SpendLogFilter {
            key_alias: Some("no-such-alias".into()),
            ..Default::default()
        };
        assert!(f(none).await.is_empty());
    }
}

#[tokio::test]
async fn request_detail_round_trips_and_lists_leave_content_out() {
    for db in every_backend().await {
        let s = &db.store;
        let key = KeyRow::new("sk-d1", T0);
        let mut l = log(&key, 0.02, T0);
        l.requested_model = Some("gpt-4o".into());
        l.model_group = "gpt-4o-mini".into();
        l.overhead_us = Some(412);
        l.retries = 1;
        l.fallbacks = 1;
        l.hedges = 0;
        l.attempts = vec![
            AttemptLog {
                deployment: "d-1".into(),
                model_group: "gpt-4o".into(),
                provider: "openai".into(),
                hedge: false,
                start_us: 300,
                duration_us: Some(12_000),
                result: "timeout".into(),
                status: Some(504),
                message: Some("no answer within 12ms".into()),
            },
            AttemptLog {
                deployment: "d-2".into(),
                model_group: "gpt-4o-mini".into(),
                provider: "openai".into(),
                hedge: false,
                start_us: 12_500,
                duration_us: None,
                result: "ok".into(),
                status: None,
                message: None,
            },
        ];
        l.http_status = Some(200);
        l.error_type = Some("server_error".into());
        l.error_message = Some("a message, as the client got it".into());
        l.messages = Some(r#"[{"role":"user","content":"hi"}]"#.into());
        l.response = Some(r#"{"choices":[]}"#.into());
        l.request_tags = vec!["prod".into(), "team \"a\"".into()];
        s.write_spend_batch(std::slice::from_ref(&l)).await.unwrap();
        let one = s
            .spend_logs(&SpendLogFilter {
                id: Some(l.id.clone()),
                content: true,
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(one, [l.clone()], "{:?}", s.backend());
        let listed = s.spend_logs(&SpendLogFilter::default()).await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0].messages, None);
        assert_eq!(listed[0].response, None);
        assert_eq!(listed[0].attempts, l.attempts);
    }
}

#[tokio::test]
async fn spend_by_tag_sums_each_tag_in_the_time_range() {
    for db in every_backend().await {
        let s = &db.store;
        let key = KeyRow::new("sk-tags", T0);
        let tagged = |spend: f64, at: OffsetDateTime, tags: &[&str]| {
            let mut l = log(&key, spend, at);
            l.request_tags = tags.iter().map(|t| (*t).to_owned()).collect();
            l
        };
        let hour = time::Duration::hours(1);
        let logs = [
            tagged(0.5, T0, &["prod", "team-a"]),
            tagged(0.25, T0 + hour, &["prod"]),
            // A tag listed twice counts the request once.
            tagged(1.0, T0 + hour * 2, &["batch", "batch"]),
            tagged(2.0, T0 + hour * 3, &[]),
            tagged(0.125, T0 - hour, &["team-a", "ünï"]),
        ];
        s.write_spend_batch(&logs).await.unwrap();
        // Older rows and untagged ones read as no tags.
        let untagged = s
            .spend_logs(&SpendLogFilter {
                id: Some(logs[3].id.clone()),
                ..Default::default()
            })
            .await
            .unwrap();
        assert!(untagged[0].request_tags.is_empty());

        let all = s.spend_by_tag(None, None).await.unwrap();
        let rows: Vec<(&str, u64, f64, u64)> = all
            .iter()
            .map(|t| (t.tag.as_str(), t.requests, t.spend, t.total_tokens))
            .collect();
        // Each log has 100 prompt and 20 completion tokens.
        assert_eq!(
            rows,
            [
                ("batch", 1, 1.0, 120),
                ("prod", 2, 0.75, 240),
                ("team-a", 2, 0.625, 240),
                ("ünï", 1, 0.125, 120),
            ],
            "{:?}",
            s.backend()
        );
        let window = s.spend_by_tag(Some(T0), Some(T0 + hour * 2)).await.unwrap();
        let tags: Vec<(&str, u64)> = window
            .iter()
            .map(|t| (t.tag.as_str(), t.requests))
            .collect();
        assert_eq!(tags, [("prod", 2), ("team-a", 1)], "{:?}", s.backend());
        assert!(s
            .spend_by_tag(Some(T0 + hour * 10), None)
            .await
            .unwrap()
            .is_empty());
        // LiteLLM's `/spend/tags` names.
        assert_eq!(
            serde_json::to_value(&all[0]).unwrap(),
            serde_json::json!({"individual_request_tag": "batch", "log_count": 1,
                               "total_spend": 1.0, "total_tokens": 120})
        );
    }
}

#[test]
fn location_from_settings() {
    let default = std::path::Path::new("sluice.db");
    let pg = Secret::new("postgres://u:p@127.0.0.1:5432/db".to_owned());
    assert_eq!(
        Location::from_settings(Some(&pg), Some("sqlite:other.db".into()), default)
            .unwrap()
            .backend(),
        Backend::Postgres
    );
    match Location::from_settings(None, Some("sqlite://data/x.db?mode=rwc".into()), default) {
        Ok(Location::Sqlite(p)) => assert_eq!(p, std::path::Path::new("data/x.db")),
        other => panic!("{other:?}"),
    }
    match Location::from_settings(None, Some("  ".into()), default) {
        Ok(Location::Sqlite(p)) => assert_eq!(p, default),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        Location::from_settings(None, Some("mysql://x".into()), default),
        Err(StoreError::UnsupportedUrl)
    ));
    // The URL's password never shows in debug output.
    let shown = format!(
        "{:?}",
        Location::from_settings(Some(&pg), None, default).unwrap()
    );
    assert!(!shown.contains(":p@"), "{shown}");
}
