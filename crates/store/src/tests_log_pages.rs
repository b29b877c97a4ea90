//! The console's reads of the spend log, against SQLite and PostgreSQL: pages by keyset
//! (ties within a millisecond included), the names of a page's keys, teams and users in one
//! query, and spend summed by user and end user over a range.

use time::macros::datetime;
use time::OffsetDateTime;

use super::testing::every_backend;
use super::*;

const T0: OffsetDateTime = datetime!(2026-03-01 10:00 UTC);

/// Eleven requests: ids `r00`..`r10`; every third shares its millisecond with the one before
/// (ties the id breaks); even ones are team `a`'s, odd ones `b`'s; `r04` and `r07` failed.
fn rows() -> Vec<SpendLog> {
    let mut at = T0;
    (0..11)
        .map(|i| {
            if i % 3 != 2 {
                at += time::Duration::seconds(1);
            }
            let mut l = SpendLog::new(format!("r{i:02}"), "gpt-4o".into(), at);
            l.id = format!("id-{i:02}");
            l.team_id = Some(if i % 2 == 0 { "a" } else { "b" }.into());
            if i == 4 || i == 7 {
                l.status = SpendStatus::Failure;
            }
            l
        })
        .collect()
}

fn ids(logs: &[SpendLog]) -> Vec<&str> {
    logs.iter().map(|l| l.request_id.as_str()).collect()
}

/// Every page of `filter`, `size` rows each, following the older side of each page's last
/// row; then back from the last page, following the newer side of each page's first row.
async fn walk(
    s: &Store,
    filter: &SpendLogFilter,
    size: u64,
) -> (Vec<Vec<String>>, Vec<Vec<String>>) {
    let read = |cursor: Option<Cursor>| {
        let f = SpendLogFilter {
            cursor,
            page: Page {
                offset: 0,
                limit: size,
            },
            ..filter.clone()
        };
        async move { s.spend_logs(&f).await.unwrap() }
    };
    let owned = |v: &[SpendLog]| ids(v).into_iter().map(str::to_owned).collect::<Vec<_>>();
    let mut forward = Vec::new();
    let mut last_page = Vec::new();
    let mut page = read(None).await;
    while !page.is_empty() {
        forward.push(owned(&page));
        let last = LogPosition::of(page.last().unwrap());
        let next = read(Some(Cursor::Before(last))).await;
        last_page = std::mem::replace(&mut page, next);
    }
    let mut back = Vec::new();
    let mut page = last_page;
    while !page.is_empty() {
        back.push(owned(&page));
        let first = LogPosition::of(page.first().unwrap());
        page = read(Some(Cursor::After(first))).await;
    }
    back.reverse();
    (forward, back)
}

#[tokio::test]
async fn pages_follow_the_keyset_both_ways_ties_included() {
    for db in every_backend().await {
        let s = &db.store;
        s.write_spend_batch(&rows()).await.unwrap();
        let all = SpendLogFilter::default();
        // Three a page: every page boundary falls between two rows of one millisecond.
        let (forward, back) = walk(s, &all, 3).await;
        assert_eq!(
            forward,
            [
                vec!["r10", "r09", "r08"],
                vec!["r07", "r06", "r05"],
                vec!["r04", "r03", "r02"],
                vec!["r01", "r00"],
            ],
            "{:?}",
            s.backend()
        );
        // Read back from the last page, newer side by newer side: the same pages.
        assert_eq!(back, forward, "{:?}", s.backend());

        // A filter holds on every page: team a's requests, and failures only.
        let team = SpendLogFilter {
            team_id: Some("a".into()),
            ..Default::default()
        };
        let (forward, back) = walk(s, &team, 2).await;
        assert_eq!(
            forward.concat(),
            ["r10", "r08", "r06", "r04", "r02", "r00"],
            "{:?}",
            s.backend()
        );
        assert_eq!(back, forward);
        let failed = SpendLogFilter {
            status: Some(SpendStatus::Failure),
            ..Default::default()
        };
        let (forward, _) = walk(s, &failed, 1).await;
        assert_eq!(forward, [vec!["r07"], vec!["r04"]], "{:?}", s.backend());
    }
}

#[test]
fn a_position_reads_back_from_its_text() {
    let p = LogPosition {
        start_ms: 1_767_225_600_123,
        id: "0b7e…-id".into(),
    };
    assert_eq!(LogPosition::parse(&p.to_text()), Some(p));
    for bad in ["", "12", "x.id", "12.", &format!("1.{}", "a".repeat(65))] {
        assert_eq!(LogPosition::parse(bad), None, "{bad}");
    }
}

#[tokio::test]
async fn names_of_a_pages_keys_teams_and_users_come_in_one_read() {
    for db in every_backend().await {
        let s = &db.store;
        let mut named = KeyRow::new("sk-named-abcd", T0);
        named.key_alias = Some("app-one".into());
        named.team_id = Some("t1".into());
        named.user_id = Some("ana".into());
        s.create_key(&named).await.unwrap();
        let plain = KeyRow::new("sk-plain-wxyz", T0);
        s.create_key(&plain).await.unwrap();
        let mut team = TeamRow::new("t1".into(), T0);
        team.team_alias = Some("Search".into());
        s.create_team(&team).await.unwrap();
        let mut ana = UserRow::new("ana".into(), T0);
        ana.user_email = Some("ana@example.com".into());
        s.create_user(&ana).await.unwrap();

        let gone = KeyHash::of("sk-deleted");
        let keys = [named.token.as_str(), plain.token.as_str(), gone.as_str()];
        let names = s
            .names(Named {
                keys: &keys,
                teams: &["t1", "t-none"],
                users: &["ana"],
            })
            .await
            .unwrap();
        let k = &names.keys[named.token.as_str()];
        assert_eq!(k.alias.as_deref(), Some("app-one"));
        assert_eq!(k.key_name, "sk-...abcd");
        assert_eq!(k.team_id.as_deref(), Some("t1"));
        assert_eq!(names.keys[plain.token.as_str()].key_name, "sk-...wxyz");
        assert!(!names.keys.contains_key(gone.as_str()), "a deleted key");
        assert_eq!(names.teams["t1"].alias.as_deref(), Some("Search"));
        assert!(!names.teams.contains_key("t-none"));
        assert_eq!(names.users["ana"].email.as_deref(), Some("ana@example.com"));
        // Nothing to name, no read.
        assert!(s.names(Named::default()).await.unwrap().keys.is_empty());
    }
}

#[tokio::test]
async fn spend_sums_by_user_and_end_user_in_the_range() {
    for db in every_backend().await {
        let s = &db.store;
        let mut logs = Vec::new();
        for (i, (user, end_user)) in [("ana", "c1"), ("ana", "c2"), ("bob", "c1"), ("ana", "c1")]
            .into_iter()
            .enumerate()
        {
            let mut l = SpendLog::new(
                format!("u{i}"),
                "gpt-4o".into(),
                T0 + time::Duration::days(i as i64),
            );
            l.user_id = Some(user.into());
            l.end_user = Some(end_user.into());
            l.spend = 1.0 + i as f64;
            l.usage.prompt_tokens = 10;
            l.usage.completion_tokens = 5;
            logs.push(l);
        }
        s.write_spend_batch(&logs).await.unwrap();
        // Days 0 to 2: the fourth request (day 3) is outside.
        let (from, to) = (T0, T0 + time::Duration::days(3));
        let by_user = s.spend_grouped(from, to, SpendBy::User).await.unwrap();
        let rows: Vec<(&str, u64, f64, u64)> = by_user
            .iter()
            .map(|g| (g.name.as_str(), g.requests, g.spend, g.total_tokens))
            .collect();
        assert_eq!(
            rows,
            [("ana", 2, 3.0, 30), ("bob", 1, 3.0, 15)],
            "{:?}",
            s.backend()
        );
        let by_end_user = s.spend_grouped(from, to, SpendBy::EndUser).await.unwrap();
        let rows: Vec<(&str, u64)> = by_end_user
            .iter()
            .map(|g| (g.name.as_str(), g.requests))
            .collect();
        assert_eq!(rows, [("c1", 2), ("c2", 1)], "{:?}", s.backend());
    }
}
