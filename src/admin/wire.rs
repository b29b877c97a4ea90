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
    retried.attempts = vec![
        AttemptLog {
            deployment: "a".into(),
            model_group: "gpt-4o".into(),
            provider: "openai".into(),
            hedge: false,
            start_us: 10,
            duration_us: Some(100),
            result: "timeout".into(),
        },
        AttemptLog {
            deployment: "b".into(),
            model_group: "fallback".into(),
            provider: "anthropic".into(),
            hedge: true,
            start_us: 200,
            duration_us: None,
            result: "open".into(),
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

/// The shapes, as the handlers answered before their answers were typed.
const SHAPES: &[(&str, &str)] = &[
    (
        "POST /user/new",
        ".aliases.fast: string
         .aliases: object
         .blocked: bool
         .budget_duration: null
         .budget_id: null
         .budget_reset_at: null
         .created_at: string
         .key: string
         .max_budget: number
         .max_parallel_requests: null
         .metadata.desk: string
         .metadata: object
         .models: array
         .object_permission: null
         .organizations: array
         .organizations[]: string
         .rpm_limit: null
         .spend: number
         .team_id: null
         .token: string
         .tpm_limit: null
         .updated_at: string
         .user_alias: null
         .user_email: string
         .user_id: string
         .user_role: string
         : object",
    ),
    (
        "POST /team/new",
        ".blocked: bool
         .budget_duration: string
         .budget_id: null
         .budget_reset_at: string
         .created_at: string
         .max_budget: number
         .max_parallel_requests: number
         .members_with_roles: array
         .members_with_roles[].role: string
         .members_with_roles[].user_email: string
         .members_with_roles[].user_id: string
         .members_with_roles[]: object
         .metadata.owner: string
         .metadata.tags: array
         .metadata.tags[]: string
         .metadata: object
         .model_aliases.fast: string
         .model_aliases: object
         .models: array
         .models[]: string
         .object_permission.mcp_servers: array
         .object_permission.mcp_servers[]: string
         .object_permission: object
         .organization_id: null
         .rpm_limit: number
         .spend: number
         .team_alias: string
         .team_id: string
         .team_member_budget: number
         .tpm_limit: number
         .updated_at: string
         : object",
    ),
    (
        "POST /team/update",
        ".data.blocked: bool
         .data.budget_duration: string
         .data.budget_id: null
         .data.budget_reset_at: string
         .data.created_at: string
         .data.max_budget: number
         .data.max_parallel_requests: number
         .data.members_with_roles: array
         .data.members_with_roles[].role: string
         .data.members_with_roles[].user_email: string
         .data.members_with_roles[].user_id: string
         .data.members_with_roles[]: object
         .data.metadata.owner: string
         .data.metadata.tags: array
         .data.metadata.tags[]: string
         .data.metadata: object
         .data.model_aliases.fast: string
         .data.model_aliases: object
         .data.models: array
         .data.models[]: string
         .data.object_permission.mcp_servers: array
         .data.object_permission.mcp_servers[]: string
         .data.object_permission: object
         .data.organization_id: null
         .data.rpm_limit: number
         .data.spend: number
         .data.team_alias: string
         .data.team_id: string
         .data.team_member_budget: number
         .data.tpm_limit: number
         .data.updated_at: string
         .data: object
         .team_id: string
         : object",
    ),
    (
        "POST /team/member_add",
        ".blocked: bool
         .budget_duration: string
         .budget_id: null
         .budget_reset_at: string
         .created_at: string
         .max_budget: number
         .max_parallel_requests: number
         .members_with_roles: array
         .members_with_roles[].role: string
         .members_with_roles[].user_email: null
         .members_with_roles[].user_email: string
         .members_with_roles[].user_id: string
         .members_with_roles[]: object
         .metadata.max_budget_in_team.u3: number
         .metadata.max_budget_in_team: object
         .metadata.owner: string
         .metadata.tags: array
         .metadata.tags[]: string
         .metadata: object
         .model_aliases.fast: string
         .model_aliases: object
         .models: array
         .models[]: string
         .object_permission.mcp_servers: array
         .object_permission.mcp_servers[]: string
         .object_permission: object
         .organization_id: null
         .rpm_limit: number
         .spend: number
         .team_alias: string
         .team_id: string
         .team_member_budget: number
         .tpm_limit: number
         .updated_at: string
         : object",
    ),
    (
        "POST /key/generate",
        ".aliases.fast: string
         .aliases: object
         .allowed_cache_controls: array
         .allowed_cache_controls[]: string
         .blocked: bool
         .budget_duration: string
         .budget_id: null
         .budget_reset_at: string
         .created_at: string
         .expires: string
         .key: string
         .key_alias: string
         .key_name: string
         .max_budget: number
         .max_parallel_requests: number
         .metadata.guardrails: array
         .metadata.guardrails[]: string
         .metadata.owner: string
         .metadata.tags: array
         .metadata.tags[]: string
         .metadata: object
         .models: array
         .models[]: string
         .object_permission.mcp_servers: array
         .object_permission.mcp_servers[]: string
         .object_permission: object
         .organization_id: null
         .rpm_limit: number
         .soft_budget: number
         .spend: number
         .team_id: string
         .token: string
         .token_id: string
         .tpm_limit: number
         .updated_at: string
         .user_id: string
         : object",
    ),
    (
        "GET /key/info",
        ".info.aliases.fast: string
         .info.aliases: object
         .info.allowed_cache_controls: array
         .info.allowed_cache_controls[]: string
         .info.blocked: bool
         .info.budget_duration: string
         .info.budget_id: null
         .info.budget_reset_at: string
         .info.created_at: string
         .info.expires: string
         .info.key_alias: string
         .info.key_name: string
         .info.max_budget: number
         .info.max_parallel_requests: number
         .info.metadata.guardrails: array
         .info.metadata.guardrails[]: string
         .info.metadata.owner: string
         .info.metadata.tags: array
         .info.metadata.tags[]: string
         .info.metadata: object
         .info.models: array
         .info.models[]: string
         .info.object_permission.mcp_servers: array
         .info.object_permission.mcp_servers[]: string
         .info.object_permission: object
         .info.organization_id: null
         .info.rpm_limit: number
         .info.soft_budget: number
         .info.spend: number
         .info.team_id: string
         .info.token: string
         .info.tpm_limit: number
         .info.updated_at: string
         .info.user_id: string
         .info: object
         .key: string
         : object",
    ),
    (
        "GET /key/list",
        ".current_page: number
         .keys: array
         .keys[]: string
         .total_count: number
         .total_pages: number
         : object",
    ),
    (
        "GET /key/list full",
        ".current_page: number
         .keys: array
         .keys[].aliases.fast: string
         .keys[].aliases: object
         .keys[].allowed_cache_controls: array
         .keys[].allowed_cache_controls[]: string
         .keys[].blocked: bool
         .keys[].budget_duration: null
         .keys[].budget_duration: string
         .keys[].budget_id: null
         .keys[].budget_reset_at: null
         .keys[].budget_reset_at: string
         .keys[].created_at: string
         .keys[].expires: null
         .keys[].expires: string
         .keys[].key_alias: null
         .keys[].key_alias: string
         .keys[].key_name: string
         .keys[].max_budget: null
         .keys[].max_budget: number
         .keys[].max_parallel_requests: null
         .keys[].max_parallel_requests: number
         .keys[].metadata.guardrails: array
         .keys[].metadata.guardrails[]: string
         .keys[].metadata.owner: string
         .keys[].metadata.tags: array
         .keys[].metadata.tags[]: string
         .keys[].metadata: object
         .keys[].models: array
         .keys[].models[]: string
         .keys[].object_permission.mcp_servers: array
         .keys[].object_permission.mcp_servers[]: string
         .keys[].object_permission: null
         .keys[].object_permission: object
         .keys[].organization_id: null
         .keys[].rpm_limit: null
         .keys[].rpm_limit: number
         .keys[].soft_budget: number
         .keys[].spend: number
         .keys[].team_id: null
         .keys[].team_id: string
         .keys[].token: string
         .keys[].tpm_limit: null
         .keys[].tpm_limit: number
         .keys[].updated_at: string
         .keys[].user_id: string
         .keys[]: object
         .total_count: number
         .total_pages: number
         : object",
    ),
    (
        "POST /key/update",
        ".aliases.fast: string
         .aliases: object
         .allowed_cache_controls: array
         .allowed_cache_controls[]: string
         .blocked: bool
         .budget_duration: string
         .budget_id: null
         .budget_reset_at: string
         .created_at: string
         .expires: string
         .key_alias: string
         .key_name: string
         .max_budget: number
         .max_parallel_requests: number
         .metadata.guardrails: array
         .metadata.guardrails[]: string
         .metadata.owner: string
         .metadata.tags: array
         .metadata.tags[]: string
         .metadata: object
         .models: array
         .models[]: string
         .object_permission.mcp_servers: array
         .object_permission.mcp_servers[]: string
         .object_permission: object
         .organization_id: null
         .rpm_limit: number
         .soft_budget: number
         .spend: number
         .team_id: string
         .token: string
         .tpm_limit: number
         .updated_at: string
         .user_id: string
         : object",
    ),
    (
        "POST /key/block",
        ".aliases.fast: string
         .aliases: object
         .allowed_cache_controls: array
         .allowed_cache_controls[]: string
         .blocked: bool
         .budget_duration: string
         .budget_id: null
         .budget_reset_at: string
         .created_at: string
         .expires: string
         .key_alias: string
         .key_name: string
         .max_budget: number
         .max_parallel_requests: number
         .metadata.guardrails: array
         .metadata.guardrails[]: string
         .metadata.owner: string
         .metadata.tags: array
         .metadata.tags[]: string
         .metadata: object
         .models: array
         .models[]: string
         .object_permission.mcp_servers: array
         .object_permission.mcp_servers[]: string
         .object_permission: object
         .organization_id: null
         .rpm_limit: number
         .soft_budget: number
         .spend: number
         .team_id: string
         .token: string
         .tpm_limit: number
         .updated_at: string
         .user_id: string
         : object",
    ),
    (
        "POST /key/regenerate",
        ".aliases.fast: string
         .aliases: object
         .allowed_cache_controls: array
         .allowed_cache_controls[]: string
         .blocked: bool
         .budget_duration: string
         .budget_id: null
         .budget_reset_at: string
         .created_at: string
         .expires: string
         .key: string
         .key_alias: string
         .key_name: string
         .max_budget: number
         .max_parallel_requests: number
         .metadata.guardrails: array
         .metadata.guardrails[]: string
         .metadata.owner: string
         .metadata.tags: array
         .metadata.tags[]: string
         .metadata: object
         .models: array
         .models[]: string
         .object_permission.mcp_servers: array
         .object_permission.mcp_servers[]: string
         .object_permission: object
         .organization_id: null
         .rpm_limit: number
         .soft_budget: number
         .spend: number
         .team_id: string
         .token: string
         .token_id: string
         .tpm_limit: number
         .updated_at: string
         .user_id: string
         : object",
    ),
    (
        "GET /team/info",
        ".keys: array
         .keys[].aliases.fast: string
         .keys[].aliases: object
         .keys[].allowed_cache_controls: array
         .keys[].allowed_cache_controls[]: string
         .keys[].blocked: bool
         .keys[].budget_duration: string
         .keys[].budget_id: null
         .keys[].budget_reset_at: string
         .keys[].created_at: string
         .keys[].expires: string
         .keys[].key_alias: string
         .keys[].key_name: string
         .keys[].max_budget: number
         .keys[].max_parallel_requests: number
         .keys[].metadata.guardrails: array
         .keys[].metadata.guardrails[]: string
         .keys[].metadata.owner: string
         .keys[].metadata.tags: array
         .keys[].metadata.tags[]: string
         .keys[].metadata: object
         .keys[].models: array
         .keys[].models[]: string
         .keys[].object_permission.mcp_servers: array
         .keys[].object_permission.mcp_servers[]: string
         .keys[].object_permission: object
         .keys[].organization_id: null
         .keys[].rpm_limit: number
         .keys[].soft_budget: number
         .keys[].spend: number
         .keys[].team_id: string
         .keys[].token: string
         .keys[].tpm_limit: number
         .keys[].updated_at: string
         .keys[].user_id: string
         .keys[]: object
         .team_id: string
         .team_info.blocked: bool
         .team_info.budget_duration: string
         .team_info.budget_id: null
         .team_info.budget_reset_at: string
         .team_info.created_at: string
         .team_info.max_budget: number
         .team_info.max_parallel_requests: number
         .team_info.members_with_roles: array
         .team_info.members_with_roles[].role: string
         .team_info.members_with_roles[].user_email: null
         .team_info.members_with_roles[].user_email: string
         .team_info.members_with_roles[].user_id: string
         .team_info.members_with_roles[]: object
         .team_info.metadata.max_budget_in_team.u3: number
         .team_info.metadata.max_budget_in_team: object
         .team_info.metadata.owner: string
         .team_info.metadata.tags: array
         .team_info.metadata.tags[]: string
         .team_info.metadata: object
         .team_info.model_aliases.fast: string
         .team_info.model_aliases: object
         .team_info.models: array
         .team_info.models[]: string
         .team_info.object_permission.mcp_servers: array
         .team_info.object_permission.mcp_servers[]: string
         .team_info.object_permission: object
         .team_info.organization_id: null
         .team_info.rpm_limit: number
         .team_info.spend: number
         .team_info.team_alias: string
         .team_info.team_id: string
         .team_info.team_member_budget: number
         .team_info.tpm_limit: number
         .team_info.updated_at: string
         .team_info: object
         : object",
    ),
    (
        "GET /team/list",
        ": array
         [].blocked: bool
         [].budget_duration: string
         [].budget_id: null
         [].budget_reset_at: string
         [].created_at: string
         [].max_budget: number
         [].max_parallel_requests: number
         [].members_with_roles: array
         [].members_with_roles[].role: string
         [].members_with_roles[].user_email: null
         [].members_with_roles[].user_id: string
         [].members_with_roles[]: object
         [].metadata.max_budget_in_team.u3: number
         [].metadata.max_budget_in_team: object
         [].metadata.owner: string
         [].metadata.tags: array
         [].metadata.tags[]: string
         [].metadata: object
         [].model_aliases.fast: string
         [].model_aliases: object
         [].models: array
         [].models[]: string
         [].object_permission.mcp_servers: array
         [].object_permission.mcp_servers[]: string
         [].object_permission: object
         [].organization_id: null
         [].rpm_limit: number
         [].spend: number
         [].team_alias: string
         [].team_id: string
         [].team_member_budget: number
         [].tpm_limit: number
         [].updated_at: string
         []: object",
    ),
    (
        "GET /user/info",
        ".keys: array
         .keys[].aliases.fast: string
         .keys[].aliases: object
         .keys[].allowed_cache_controls: array
         .keys[].allowed_cache_controls[]: string
         .keys[].blocked: bool
         .keys[].budget_duration: null
         .keys[].budget_duration: string
         .keys[].budget_id: null
         .keys[].budget_reset_at: null
         .keys[].budget_reset_at: string
         .keys[].created_at: string
         .keys[].expires: null
         .keys[].expires: string
         .keys[].key_alias: null
         .keys[].key_alias: string
         .keys[].key_name: string
         .keys[].max_budget: null
         .keys[].max_budget: number
         .keys[].max_parallel_requests: null
         .keys[].max_parallel_requests: number
         .keys[].metadata.guardrails: array
         .keys[].metadata.guardrails[]: string
         .keys[].metadata.owner: string
         .keys[].metadata.tags: array
         .keys[].metadata.tags[]: string
         .keys[].metadata: object
         .keys[].models: array
         .keys[].models[]: string
         .keys[].object_permission.mcp_servers: array
         .keys[].object_permission.mcp_servers[]: string
         .keys[].object_permission: null
         .keys[].object_permission: object
         .keys[].organization_id: null
         .keys[].rpm_limit: null
         .keys[].rpm_limit: number
         .keys[].soft_budget: number
         .keys[].spend: number
         .keys[].team_id: null
         .keys[].team_id: string
         .keys[].token: string
         .keys[].tpm_limit: null
         .keys[].tpm_limit: number
         .keys[].updated_at: string
         .keys[].user_id: string
         .keys[]: object
         .teams: array
         .teams[].blocked: bool
         .teams[].budget_duration: string
         .teams[].budget_id: null
         .teams[].budget_reset_at: string
         .teams[].created_at: string
         .teams[].max_budget: number
         .teams[].max_parallel_requests: number
         .teams[].metadata.max_budget_in_team.u3: number
         .teams[].metadata.max_budget_in_team: object
         .teams[].metadata.owner: string
         .teams[].metadata.tags: array
         .teams[].metadata.tags[]: string
         .teams[].metadata: object
         .teams[].model_aliases.fast: string
         .teams[].model_aliases: object
         .teams[].models: array
         .teams[].models[]: string
         .teams[].object_permission.mcp_servers: array
         .teams[].object_permission.mcp_servers[]: string
         .teams[].object_permission: object
         .teams[].organization_id: null
         .teams[].rpm_limit: number
         .teams[].spend: number
         .teams[].team_alias: string
         .teams[].team_id: string
         .teams[].team_member_budget: number
         .teams[].team_memberships: array
         .teams[].team_memberships[].role: string
         .teams[].team_memberships[].team_id: string
         .teams[].team_memberships[].user_id: string
         .teams[].team_memberships[]: object
         .teams[].tpm_limit: number
         .teams[].updated_at: string
         .teams[]: object
         .user_id: string
         .user_info.aliases.fast: string
         .user_info.aliases: object
         .user_info.blocked: bool
         .user_info.budget_duration: null
         .user_info.budget_id: null
         .user_info.budget_reset_at: null
         .user_info.created_at: string
         .user_info.max_budget: number
         .user_info.max_parallel_requests: null
         .user_info.metadata.desk: string
         .user_info.metadata: object
         .user_info.models: array
         .user_info.object_permission: null
         .user_info.organizations: array
         .user_info.organizations[]: string
         .user_info.rpm_limit: null
         .user_info.spend: number
         .user_info.team_id: string
         .user_info.tpm_limit: null
         .user_info.updated_at: string
         .user_info.user_alias: null
         .user_info.user_email: string
         .user_info.user_id: string
         .user_info.user_role: string
         .user_info: object
         : object",
    ),
    (
        "GET /user/list",
        ".page: number
         .page_size: number
         .total: number
         .total_pages: number
         .users: array
         .users[].aliases.fast: string
         .users[].aliases: object
         .users[].blocked: bool
         .users[].budget_duration: null
         .users[].budget_id: null
         .users[].budget_reset_at: null
         .users[].created_at: string
         .users[].max_budget: null
         .users[].max_budget: number
         .users[].max_parallel_requests: null
         .users[].metadata.desk: string
         .users[].metadata: object
         .users[].models: array
         .users[].object_permission: null
         .users[].organizations: array
         .users[].organizations[]: string
         .users[].rpm_limit: null
         .users[].spend: number
         .users[].team_id: string
         .users[].tpm_limit: null
         .users[].updated_at: string
         .users[].user_alias: null
         .users[].user_email: string
         .users[].user_id: string
         .users[].user_role: string
         .users[]: object
         : object",
    ),
    (
        "POST /user/update",
        ".aliases.fast: string
         .aliases: object
         .blocked: bool
         .budget_duration: null
         .budget_id: null
         .budget_reset_at: null
         .created_at: string
         .max_budget: number
         .max_parallel_requests: null
         .metadata.desk: string
         .metadata: object
         .models: array
         .object_permission: null
         .organizations: array
         .organizations[]: string
         .rpm_limit: null
         .spend: number
         .team_id: string
         .tpm_limit: null
         .updated_at: string
         .user_alias: null
         .user_email: string
         .user_id: string
         .user_role: string
         : object",
    ),
    (
        "POST /customer/new",
        ".alias: string
         .allowed_model_region: string
         .blocked: bool
         .budget_id: null
         .created_at: string
         .default_model: null
         .litellm_budget_table.budget_duration: string
         .litellm_budget_table.budget_id: null
         .litellm_budget_table.budget_reset_at: string
         .litellm_budget_table.max_budget: number
         .litellm_budget_table.max_parallel_requests: null
         .litellm_budget_table.object_permission: null
         .litellm_budget_table.rpm_limit: number
         .litellm_budget_table.soft_budget: number
         .litellm_budget_table.tpm_limit: number
         .litellm_budget_table: object
         .metadata.plan: string
         .metadata: object
         .models: array
         .spend: number
         .updated_at: string
         .user_id: string
         : object",
    ),
    (
        "GET /customer/info",
        ".alias: string
         .allowed_model_region: string
         .blocked: bool
         .budget_id: null
         .created_at: string
         .default_model: null
         .litellm_budget_table.budget_duration: string
         .litellm_budget_table.budget_id: null
         .litellm_budget_table.budget_reset_at: string
         .litellm_budget_table.max_budget: number
         .litellm_budget_table.max_parallel_requests: null
         .litellm_budget_table.object_permission: null
         .litellm_budget_table.rpm_limit: number
         .litellm_budget_table.soft_budget: number
         .litellm_budget_table.tpm_limit: number
         .litellm_budget_table: object
         .metadata.plan: string
         .metadata: object
         .models: array
         .spend: number
         .updated_at: string
         .user_id: string
         : object",
    ),
    (
        "GET /customer/list",
        ": array
         [].alias: string
         [].allowed_model_region: string
         [].blocked: bool
         [].budget_id: null
         [].created_at: string
         [].default_model: null
         [].litellm_budget_table.budget_duration: string
         [].litellm_budget_table.budget_id: null
         [].litellm_budget_table.budget_reset_at: string
         [].litellm_budget_table.max_budget: number
         [].litellm_budget_table.max_parallel_requests: null
         [].litellm_budget_table.object_permission: null
         [].litellm_budget_table.rpm_limit: number
         [].litellm_budget_table.soft_budget: number
         [].litellm_budget_table.tpm_limit: number
         [].litellm_budget_table: object
         [].metadata.plan: string
         [].metadata: object
         [].models: array
         [].spend: number
         [].updated_at: string
         [].user_id: string
         []: object",
    ),
    (
        "POST /customer/update",
        ".alias: string
         .allowed_model_region: string
         .blocked: bool
         .budget_id: null
         .created_at: string
         .default_model: null
         .litellm_budget_table.budget_duration: string
         .litellm_budget_table.budget_id: null
         .litellm_budget_table.budget_reset_at: string
         .litellm_budget_table.max_budget: number
         .litellm_budget_table.max_parallel_requests: null
         .litellm_budget_table.object_permission: null
         .litellm_budget_table.rpm_limit: number
         .litellm_budget_table.soft_budget: number
         .litellm_budget_table.tpm_limit: number
         .litellm_budget_table: object
         .metadata.plan: string
         .metadata: object
         .models: array
         .spend: number
         .updated_at: string
         .user_id: string
         : object",
    ),
    (
        "POST /customer/block",
        ".blocked_users: array
         .blocked_users[].alias: string
         .blocked_users[].allowed_model_region: string
         .blocked_users[].blocked: bool
         .blocked_users[].budget_id: null
         .blocked_users[].created_at: string
         .blocked_users[].default_model: null
         .blocked_users[].litellm_budget_table.budget_duration: string
         .blocked_users[].litellm_budget_table.budget_id: null
         .blocked_users[].litellm_budget_table.budget_reset_at: string
         .blocked_users[].litellm_budget_table.max_budget: number
         .blocked_users[].litellm_budget_table.max_parallel_requests: null
         .blocked_users[].litellm_budget_table.object_permission: null
         .blocked_users[].litellm_budget_table.rpm_limit: number
         .blocked_users[].litellm_budget_table.soft_budget: number
         .blocked_users[].litellm_budget_table.tpm_limit: number
         .blocked_users[].litellm_budget_table: object
         .blocked_users[].metadata.plan: string
         .blocked_users[].metadata: object
         .blocked_users[].models: array
         .blocked_users[].spend: number
         .blocked_users[].updated_at: string
         .blocked_users[].user_id: string
         .blocked_users[]: object
         : object",
    ),
    (
        "GET /spend/logs",
        ": array
         [].api_key: null
         [].api_key: string
         [].attempts: array
         [].attempts[].custom_llm_provider: string
         [].attempts[].duration_ms: null
         [].attempts[].duration_ms: number
         [].attempts[].hedge: bool
         [].attempts[].model_group: string
         [].attempts[].model_id: string
         [].attempts[].result: string
         [].attempts[].start_ms: number
         [].attempts[]: object
         [].cache_creation_tokens: number
         [].cache_hit: string
         [].cached_tokens: number
         [].call_type: null
         [].call_type: string
         [].completion_tokens: number
         [].custom_llm_provider: null
         [].custom_llm_provider: string
         [].endTime: string
         [].end_user: null
         [].end_user: string
         [].error: null
         [].error: string
         [].fallbacks: number
         [].hedges: number
         [].id: string
         [].messages: null
         [].model_group: string
         [].model_id: null
         [].model_id: string
         [].overhead_ms: null
         [].overhead_ms: number
         [].prompt_tokens: number
         [].reasoning_tokens: number
         [].request_duration_ms: number
         [].request_id: string
         [].request_tags: array
         [].request_tags[]: string
         [].requested_model: string
         [].response: null
         [].retries: number
         [].saved_spend: number
         [].spend: number
         [].startTime: string
         [].status: string
         [].team_id: null
         [].team_id: string
         [].total_tokens: number
         [].ttfb_ms: null
         [].ttfb_ms: number
         [].user: null
         [].user: string
         []: object",
    ),
    (
        "GET /spend/logs one",
        ": array
         [].api_key: string
         [].attempts: array
         [].cache_creation_tokens: number
         [].cache_hit: string
         [].cached_tokens: number
         [].call_type: null
         [].completion_tokens: number
         [].custom_llm_provider: string
         [].endTime: string
         [].end_user: string
         [].error: null
         [].fallbacks: number
         [].hedges: number
         [].id: string
         [].messages: array
         [].messages[].content: string
         [].messages[].role: string
         [].messages[]: object
         [].model_group: string
         [].model_id: string
         [].overhead_ms: number
         [].prompt_tokens: number
         [].reasoning_tokens: number
         [].request_duration_ms: number
         [].request_id: string
         [].request_tags: array
         [].request_tags[]: string
         [].requested_model: string
         [].response: string
         [].retries: number
         [].saved_spend: number
         [].spend: number
         [].startTime: string
         [].status: string
         [].team_id: string
         [].total_tokens: number
         [].ttfb_ms: number
         [].user: string
         []: object",
    ),
    (
        "GET /spend/daily",
        ": array
         [].api_key: string
         [].cache_creation_tokens: number
         [].cached_tokens: number
         [].completion_tokens: number
         [].date: string
         [].failed_requests: number
         [].model_group: string
         [].prompt_tokens: number
         [].requests: number
         [].spend: number
         [].team_id: string
         []: object",
    ),
    (
        "GET /spend/tags",
        ": array
         [].individual_request_tag: string
         [].log_count: number
         [].total_spend: number
         [].total_tokens: number
         []: object",
    ),
    (
        "GET /audit",
        ".audit_logs: array
         .audit_logs[].action: string
         .audit_logs[].before_value.rpm_limit: number
         .audit_logs[].before_value: null
         .audit_logs[].before_value: object
         .audit_logs[].changed_by: string
         .audit_logs[].id: string
         .audit_logs[].object_id: string
         .audit_logs[].table_name: string
         .audit_logs[].updated_at: string
         .audit_logs[].updated_values.rpm_limit: number
         .audit_logs[].updated_values: object
         .audit_logs[]: object
         .page: number
         .page_size: number
         .total: number
         : object",
    ),
];

#[tokio::test]
async fn admin_answers_keep_their_wire_shape() {
    for db in every_backend().await {
        let got = answers(&db.store).await;
        let mut problems = String::new();
        for (route, v) in &got {
            match SHAPES.iter().find(|(r, _)| r == route) {
                Some((_, expected)) => problems.extend(pinned(route, v, expected)),
                None => problems.extend(pinned(route, v, "")),
            }
        }
        assert!(problems.is_empty(), "{problems}");
    }
}
