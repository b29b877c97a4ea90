//! The wire shape of every admin answer the console reads, pinned: each route's answer on a
//! rich fixture (kept fields, members, attempts, content), reduced to its members' paths and
//! JSON types. LiteLLM's clients read these names; a field renamed, dropped, added or turned
//! from a value into `null` fails here, whether the change came from a handler or from the
//! typed answer it serialises.

use std::collections::BTreeSet;

use http::Method;
use serde_json::{json, Value};

use super::tests::call;
use sluice_core::usage::Usage;
use sluice_store::testing::every_backend;
use sluice_store::{AttemptLog, AuditEntry, KeyHash, SpendLog, SpendStatus, Store};

/// Every member of `v` as `path: type`, arrays' elements merged under `[]`.
fn shape(v: &Value) -> BTreeSet<String> {
    fn walk(path: &str, v: &Value, out: &mut BTreeSet<String>) {
        let kind = match v {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Number(_) => "number",
            Value::String(_) => "string",
            Value::Array(items) => {
                for x in items {
                    walk(&format!("{path}[]"), x, out);
                }
                "array"
            }
            Value::Object(m) => {
                for (k, x) in m {
                    walk(&format!("{path}.{k}"), x, out);
                }
                "object"
            }
        };
        out.insert(format!("{path}: {kind}"));
    }
    let mut out = BTreeSet::new();
    walk("", v, &mut out);
    out
}

/// Checks `v`'s shape against `expected` (one `path: type` a line); a mismatch prints the
/// shape it found whole, to compare.
fn pinned(route: &str, v: &Value, expected: &str) -> Option<String> {
    let got = shape(v);
    let want: BTreeSet<String> = expected
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect();
    (got != want).then(|| {
        let missing: Vec<_> = want.difference(&got).collect();
        let extra: Vec<_> = got.difference(&want).collect();
        let whole: Vec<&str> = got.iter().map(String::as_str).collect();
        format!(
            "{route}: missing {missing:?}, unexpected {extra:?}; whole shape:\n{}\n",
            whole.join("\n")
        )
    })
}

async fn get(s: &Store, path: &str, query: &str) -> Value {
    call(s, Method::GET, path, query, Value::Null).await
}

async fn post(s: &Store, path: &str, body: Value) -> Value {
    call(s, Method::POST, path, "", body).await
}

/// The fixture's answers, by route, in the order they were made.
async fn answers(s: &Store) -> Vec<(&'static str, Value)> {
    let mut out = Vec::new();
    let mut push = |route: &'static str, v: Value| out.push((route, v));
    push(
        "POST /user/new",
        post(
            s,
            "/user/new",
            json!({
                "user_id": "u1",
                "user_email": "u1@example.com",
                "user_role": "internal_user",
                "password": "long enough",
                "max_budget": 5,
                "metadata": {"desk": "3"},
                "aliases": {"fast": "gpt-4o"},
                "organizations": ["o1"],
                "blocked": false,
            }),
        )
        .await,
    );
    push(
        "POST /team/new",
        post(
            s,
            "/team/new",
            json!({
                "team_id": "t1",
                "team_alias": "Team one",
                "models": ["gpt-4o"],
                "max_budget": 50,
                "budget_duration": "30d",
                "rpm_limit": 10,
                "tpm_limit": 1000,
                "max_parallel_requests": 3,
                "metadata": {"owner": "ops"},
                "model_aliases": {"fast": "gpt-4o"},
                "tags": ["blue"],
                "team_member_budget": 5,
                "object_permission": {"mcp_servers": ["github"]},
                "members_with_roles": [
                    {"user_id": "u1", "role": "admin"},
                    {"user_email": "u2@example.com", "role": "user"}
                ],
            }),
        )
        .await,
    );
    push(
        "POST /team/update",
        post(
            s,
            "/team/update",
            json!({"team_id": "t1", "team_alias": "T1"}),
        )
        .await,
    );
    push(
        "POST /team/member_add",
        post(
            s,
            "/team/member_add",
            json!({"team_id": "t1", "member": {"user_id": "u3"}, "max_budget_in_team": 2}),
        )
        .await,
    );
    let made = post(
        s,
        "/key/generate",
        json!({
            "key_alias": "app",
            "duration": "30d",
            "models": ["gpt-4o"],
            "max_budget": 10.5,
            "budget_duration": "1d",
            "rpm_limit": 60,
            "tpm_limit": 1000,
            "max_parallel_requests": 2,
            "metadata": {"owner": "ops"},
            "user_id": "u1",
            "team_id": "t1",
            "aliases": {"fast": "gpt-4o"},
            "guardrails": ["pii"],
            "tags": ["green"],
            "soft_budget": 8,
            "allowed_cache_controls": ["no-cache"],
            "object_permission": {"mcp_servers": ["github"]},
        }),
    )
    .await;
    let key = made["key"].as_str().unwrap_or_default().to_owned();
    push("POST /key/generate", made);
    push(
        "GET /key/info",
        get(s, "/key/info", &format!("key={key}")).await,
    );
    push("GET /key/list", get(s, "/key/list", "team_id=t1").await);
    push(
        "GET /key/list full",
        get(s, "/key/list", "return_full_object=true&user_id=u1").await,
    );
    push(
        "POST /key/update",
        post(s, "/key/update", json!({"key": key, "rpm_limit": 5})).await,
    );
    push(
        "POST /key/block",
        post(s, "/key/block", json!({"key": key})).await,
    );
    push(
        "POST /key/regenerate",
        post(s, "/key/regenerate", json!({"key": key})).await,
    );
    push("GET /team/info", get(s, "/team/info", "team_id=t1").await);
    push("GET /team/list", get(s, "/team/list", "").await);
    push("GET /user/info", get(s, "/user/info", "user_id=u1").await);
    push("GET /user/list", get(s, "/user/list", "page_size=2").await);
    push(
        "POST /user/update",
        post(s, "/user/update", json!({"user_id": "u1", "max_budget": 6})).await,
    );
    push(
        "POST /customer/new",
        post(
            s,
            "/customer/new",
            json!({
                "user_id": "c1",
                "alias": "Customer one",
                "max_budget": 3,
                "budget_duration": "1d",
                "rpm_limit": 6,
                "tpm_limit": 600,
                "metadata": {"plan": "pro"},
                "allowed_model_region": "eu",
                "soft_budget": 2,
            }),
        )
        .await,
    );
    push(
        "GET /customer/info",
        get(s, "/customer/info", "end_user_id=c1").await,
    );
    push("GET /customer/list", get(s, "/customer/list", "").await);
    push(
        "POST /customer/update",
        post(
            s,
            "/customer/update",
            json!({"user_id": "c1", "blocked": true}),
        )
        .await,
    );
    push(
        "POST /customer/block",
        post(s, "/customer/block", json!({"user_ids": ["c1"]})).await,
    );

    let at = time::macros::datetime!(2026-03-01 12:00 UTC);
    let mut plain = SpendLog::new("req-plain".into(), "gpt-4o".into(), at);
    plain.api_key = Some(KeyHash::of("sk-wire-fixture"));
    plain.team_id = Some("t1".into());
    plain.user_id = Some("u1".into());
    plain.end_user = Some("c1".into());
    plain.deployment_id = Some("gpt-4o-1".into());
    plain.provider = Some("openai".into());
    plain.usage = Usage {
        prompt_tokens: 100,
        completion_tokens: 10,
        cached_tokens: 30,
        cache_creation_tokens: 5,
        reasoning_tokens: 2,
        ..Usage::default()
    };
    plain.spend = 0.5;
    plain.end_time = at + time::Duration::milliseconds(250);
    plain.ttfb_ms = Some(40);
    plain.overhead_us = Some(300);
    plain.request_tags = vec!["green".into()];
    plain.messages = Some(r#"[{"role":"user","content":"hi"}]"#.into());
    plain.response = Some("cut at the cap".into());
    let mut retried = SpendLog::new("req-retried".into(), "gpt-4o".into(), at);
    retried.status = SpendStatus::Failure;
    retried.requested_model = Some("fast".into());
    retried.retries = 1;
    retried.fallbacks = 1;
    retried.call_type = Some("call_mcp_tool".into());
    retried.error = Some("502 upstream".into());
    retried.http_status = Some(502);
    retried.error_type = Some("server_error".into());
    retried.error_message = Some("upstream down".into());
    retried.attempts = vec![
        AttemptLog {
            deployment: "a".into(),
            model_group: "gpt-4o".into(),
            provider: "openai".into(),
            hedge: false,
            start_us: 10,
            duration_us: Some(100),
            result: "timeout".into(),
            status: Some(504),
            message: Some("no answer within 100µs".into()),
        },
        AttemptLog {
            deployment: "b".into(),
            model_group: "fallback".into(),
            provider: "anthropic".into(),
            hedge: true,
            start_us: 200,
            duration_us: None,
            result: "open".into(),
            status: None,
            message: None,
        },
    ];
    let id = plain.id.clone();
    if let Err(e) = s.write_spend_batch(&[plain, retried]).await {
        panic!("spend batch: {e}");
    }
    push("GET /spend/logs", get(s, "/spend/logs", "").await);
    push(
        "GET /spend/logs one",
        get(s, "/spend/logs", &format!("id={id}")).await,
    );
    push(
        "GET /spend/daily",
        get(
            s,
            "/spend/daily",
            "start_date=2026-03-01&end_date=2026-03-01",
        )
        .await,
    );
    push("GET /spend/tags", get(s, "/spend/tags", "").await);
    push(
        "GET /spend/groups",
        get(
            s,
            "/spend/groups",
            "group_by=end_user&start_date=2026-03-01&end_date=2026-03-01",
        )
        .await,
    );

    let entry = AuditEntry {
        id: "a1".into(),
        changed_at: at,
        changed_by: "admin".into(),
        action: "updated".into(),
        table_name: "keys".into(),
        object_id: "hash".into(),
        before_value: Some(json!({"rpm_limit": 1})),
        updated_values: Some(json!({"rpm_limit": 2})),
    };
    let created = AuditEntry {
        id: "a2".into(),
        action: "created".into(),
        before_value: None,
        ..entry.clone()
    };
    for e in [&entry, &created] {
        if let Err(err) = s.add_audit(e).await {
            panic!("audit: {err}");
        }
    }
    push("GET /audit", get(s, "/audit", "").await);
    out
}

/// The shapes the handlers answered before their answers were typed, route by route.
const SHAPES: &str = include_str!("wire.shapes");

/// [`SHAPES`]' block for `route`: its `path: type` lines.
fn expected(route: &str) -> String {
    SHAPES
        .split("\n\n")
        .map(|block| {
            block
                .lines()
                .filter(|l| !l.starts_with('#'))
                .collect::<Vec<_>>()
        })
        .find(|lines| lines.first() == Some(&route))
        .map(|lines| lines[1..].join("\n"))
        .unwrap_or_default()
}

#[tokio::test]
async fn admin_answers_keep_their_wire_shape() {
    for db in every_backend().await {
        let got = answers(&db.store).await;
        let mut problems = String::new();
        for (route, v) in &got {
            problems.extend(pinned(route, v, &expected(route)));
        }
        assert!(problems.is_empty(), "{problems}");
    }
}
