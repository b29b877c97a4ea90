//! The admin API through [`handle`], with the same bodies against SQLite and PostgreSQL.

use http::{Method, StatusCode};
use serde_json::{json, Value};

use super::{handle, AdminRequest};
use sluice_core::error::ApiError;
use sluice_core::usage::Usage;
use sluice_store::testing::every_backend;
use sluice_store::{KeyHash, SpendLog, Store};

pub(super) async fn call(
    store: &Store,
    method: Method,
    path: &str,
    query: &str,
    body: Value,
) -> Value {
    let body = if body.is_null() {
        Vec::new()
    } else {
        body.to_string().into_bytes()
    };
    match handle(store, &method, path, query, &body).await {
        Some(Ok(v)) => v,
        Some(Err(e)) => panic!("{method} {path}: {e}"),
        None => panic!("{path} is not an admin route"),
    }
}

async fn fails(store: &Store, method: Method, path: &str, query: &str, body: &str) -> ApiError {
    match handle(store, &method, path, query, body.as_bytes()).await {
        Some(Err(e)) => e,
        Some(Ok(v)) => panic!("{path} should fail, answered {v}"),
        None => panic!("{path} is not an admin route"),
    }
}

#[tokio::test]
async fn key_lifecycle() {
    for db in every_backend().await {
        let s = &db.store;
        call(
            s,
            Method::POST,
            "/team/new",
            "",
            json!({"team_id": "t1", "max_budget": 50}),
        )
        .await;
        let made = call(
            s,
            Method::POST,
            "/key/generate",
            "",
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
                "team_id": "t1"
            }),
        )
        .await;
        let key = made["key"].as_str().unwrap().to_owned();
        assert!(key.starts_with("sk-") && key.len() >= 3 + 43, "{key}");
        let token = made["token"].as_str().unwrap().to_owned();
        assert_eq!(token, KeyHash::of(&key).as_str());
        assert_eq!(made["key_name"], format!("sk-...{}", &key[key.len() - 4..]));
        assert_eq!(made["max_budget"], 10.5);
        assert_eq!(made["budget_duration"], "1d");
        assert!(made["budget_reset_at"].is_string());
        assert!(made["expires"].is_string());
        assert_eq!(made["spend"], 0.0);

        // The plaintext is never shown again: not by key, not by hash, not in lists.
        for by in [key.as_str(), token.as_str()] {
            let info = call(
                s,
                Method::GET,
                "/key/info",
                &format!("key={by}"),
                Value::Null,
            )
            .await;
            assert_eq!(info["info"]["token"], token.as_str());
            assert_eq!(info["info"]["rpm_limit"], 60);
            assert!(!info["info"].to_string().contains(&key));
        }
        let listed = call(s, Method::GET, "/key/list", "team_id=t1", Value::Null).await;
        assert_eq!(listed["keys"], json!([token]));
        assert_eq!(listed["total_count"], 1);
        let full = call(
            s,
            Method::GET,
            "/key/list",
            "return_full_object=true",
            Value::Null,
        )
        .await;
        assert_eq!(full["keys"][0]["key_alias"], "app");
        assert!(!full.to_string().contains(&key));

        // Update only what is sent; null clears.
        let upd = call(
            s,
            Method::POST,
            "/key/update",
            "",
            json!({"key": key, "rpm_limit": null, "max_budget": 20}),
        )
        .await;
        assert_eq!(upd["rpm_limit"], Value::Null);
        assert_eq!(upd["max_budget"], 20.0);
        assert_eq!(upd["tpm_limit"], 1000);
        assert_eq!(upd["key_alias"], "app");

        let blocked = call(s, Method::POST, "/key/block", "", json!({"key": token})).await;
        assert_eq!(blocked["blocked"], true);
        let unblocked = call(s, Method::POST, "/key/unblock", "", json!({"key": key})).await;
        assert_eq!(unblocked["blocked"], false);

        // Regenerate: a new secret for the same row; the old one is gone.
        let again = call(s, Method::POST, "/key/regenerate", "", json!({"key": key})).await;
        let new_key = again["key"].as_str().unwrap().to_owned();
        assert_ne!(new_key, key);
        assert_eq!(again["key_alias"], "app");
        assert_eq!(again["max_budget"], 20.0);
        let gone = fails(s, Method::GET, "/key/info", &format!("key={key}"), "").await;
        assert_eq!(gone.status(), StatusCode::NOT_FOUND);
        assert!(!gone.to_string().contains(&key), "{gone}");

        // LiteLLM's other spelling: the key in the path.
        let third = call(
            s,
            Method::POST,
            &format!("/key/{new_key}/regenerate"),
            "",
            Value::Null,
        )
        .await;
        let third_key = third["key"].as_str().unwrap().to_owned();
        assert_ne!(third_key, new_key);
        let e = fails(
            s,
            Method::GET,
            &format!("/key/{third_key}/regenerate"),
            "",
            "",
        )
        .await;
        assert_eq!(e.status(), StatusCode::METHOD_NOT_ALLOWED);

        // Delete by alias; a second delete is a 404 and deletes nothing.
        let del = call(
            s,
            Method::POST,
            "/key/delete",
            "",
            json!({"key_aliases": ["app"]}),
        )
        .await;
        assert_eq!(del["deleted_keys"], json!(["app"]));
        let e = fails(
            s,
            Method::POST,
            "/key/delete",
            "",
            r#"{"keys": ["sk-nope-nope"]}"#,
        )
        .await;
        assert_eq!(e.status(), StatusCode::NOT_FOUND);
        let changes = s
            .changed_since(time::OffsetDateTime::UNIX_EPOCH)
            .await
            .unwrap();
        assert_eq!(
            changes.deleted_keys.len(),
            3,
            "regenerated twice, then deleted"
        );
    }
}

#[tokio::test]
async fn bad_requests_name_the_field() {
    for db in every_backend().await {
        let s = &db.store;
        let e = fails(s, Method::POST, "/key/generate", "", r#"{"max_budjet": 5}"#).await;
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        assert_eq!(e.param(), Some("max_budjet"));
        let e = fails(s, Method::POST, "/key/update", "", r#"{"max_budget": 5}"#).await;
        assert_eq!(
            (e.status(), e.param()),
            (StatusCode::BAD_REQUEST, Some("key"))
        );
        let e = fails(
            s,
            Method::POST,
            "/key/generate",
            "",
            r#"{"budget_duration": "5y"}"#,
        )
        .await;
        assert_eq!(e.param(), Some("budget_duration"));
        let e = fails(
            s,
            Method::POST,
            "/key/generate",
            "",
            r#"{"rpm_limit": "lots"}"#,
        )
        .await;
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        assert!(e.to_string().contains("rpm_limit"), "{e}");
        let e = fails(
            s,
            Method::POST,
            "/key/generate",
            "",
            r#"{"max_budget": -1}"#,
        )
        .await;
        assert_eq!(e.param(), Some("max_budget"));
        let e = fails(
            s,
            Method::POST,
            "/key/generate",
            "",
            r#"{"team_id": "nope"}"#,
        )
        .await;
        assert_eq!(e.param(), Some("team_id"));
        let e = fails(s, Method::POST, "/key/generate", "", "{not json").await;
        assert_eq!(e.status(), StatusCode::BAD_REQUEST);
        let e = fails(s, Method::GET, "/key/info", "", "").await;
        assert_eq!(e.param(), Some("key"));
        let e = fails(s, Method::GET, "/key/list", "sise=3", "").await;
        assert_eq!(e.param(), Some("sise"));
        let e = fails(s, Method::POST, "/key/delete", "", "{}").await;
        assert_eq!(e.param(), Some("keys"));
        let e = fails(s, Method::POST, "/user/new", "", r#"{"user_role": "root"}"#).await;
        assert_eq!(e.param(), Some("user_role"));
        call(
            s,
            Method::POST,
            "/key/generate",
            "",
            json!({"key_alias": "dup"}),
        )
        .await;
        let e = fails(
            s,
            Method::POST,
            "/key/generate",
            "",
            r#"{"key_alias": "dup"}"#,
        )
        .await;
        assert_eq!(e.status(), StatusCode::CONFLICT);
        // Wrong method on a known path; unknown paths are not the admin API's.
        let e = fails(s, Method::GET, "/key/generate", "", "").await;
        assert_eq!(e.status(), StatusCode::METHOD_NOT_ALLOWED);
        assert!(handle(s, &Method::POST, "/v1/chat/completions", "", b"{}")
            .await
            .is_none());
    }
}

#[tokio::test]
async fn teams_users_and_customers() {
    for db in every_backend().await {
        let s = &db.store;
        let team = call(
            s,
            Method::POST,
            "/team/new",
            "",
            json!({"team_alias": "Search", "tpm_limit": 5000}),
        )
        .await;
        let team_id = team["team_id"].as_str().unwrap().to_owned();
        let upd = call(
            s,
            Method::POST,
            "/team/update",
            "",
            json!({"team_id": team_id, "blocked": true}),
        )
        .await;
        // LiteLLM's answer: `{"team_id", "data": team}`.
        assert_eq!(
            (
                upd["data"]["blocked"].clone(),
                upd["data"]["tpm_limit"].clone()
            ),
            (json!(true), json!(5000))
        );
        let teams = call(s, Method::GET, "/team/list", "", Value::Null).await;
        assert_eq!(teams.as_array().unwrap().len(), 1);

        // /user/new issues a key unless told not to.
        let user = call(
            s,
            Method::POST,
            "/user/new",
            "",
            json!({"user_id": "ann", "user_email": "ann@example.com", "user_role": "internal_user", "team_id": team_id, "max_budget": 3}),
        )
        .await;
        assert!(user["key"].as_str().unwrap().starts_with("sk-"));
        let quiet = call(
            s,
            Method::POST,
            "/user/new",
            "",
            json!({"user_id": "bob", "auto_create_key": false}),
        )
        .await;
        assert!(quiet.get("key").is_none());
        let info = call(s, Method::GET, "/user/info", "user_id=ann", Value::Null).await;
        assert_eq!(info["user_info"]["user_email"], "ann@example.com");
        assert_eq!(info["keys"].as_array().unwrap().len(), 1);
        let team_info = call(
            s,
            Method::GET,
            "/team/info",
            &format!("team_id={team_id}"),
            Value::Null,
        )
        .await;
        assert_eq!(team_info["keys"].as_array().unwrap().len(), 1);
        let users = call(
            s,
            Method::GET,
            "/user/list",
            "page=2&page_size=1",
            Value::Null,
        )
        .await;
        assert_eq!(
            (users["total"].clone(), users["total_pages"].clone()),
            (json!(2), json!(2))
        );
        assert_eq!(users["users"][0]["user_id"], "bob");
        call(
            s,
            Method::POST,
            "/user/update",
            "",
            json!({"user_id": "bob", "user_alias": "Bob"}),
        )
        .await;
        call(
            s,
            Method::POST,
            "/user/delete",
            "",
            json!({"user_ids": ["bob"]}),
        )
        .await;
        let e = fails(s, Method::GET, "/user/info", "user_id=bob", "").await;
        assert_eq!(e.status(), StatusCode::NOT_FOUND);

        // Customers, under both names.
        let c = call(
            s,
            Method::POST,
            "/customer/new",
            "",
            json!({"user_id": "cust-1", "max_budget": 1.5, "budget_duration": "30d"}),
        )
        .await;
        assert_eq!(c["litellm_budget_table"]["max_budget"], 1.5);
        call(
            s,
            Method::POST,
            "/end_user/update",
            "",
            json!({"user_id": "cust-1", "alias": "Acme"}),
        )
        .await;
        let got = call(
            s,
            Method::GET,
            "/end_user/info",
            "end_user_id=cust-1",
            Value::Null,
        )
        .await;
        assert_eq!(got["alias"], "Acme");
        let blocked = call(
            s,
            Method::POST,
            "/customer/block",
            "",
            json!({"user_ids": ["cust-1", "cust-new"]}),
        )
        .await;
        assert_eq!(blocked["blocked_users"].as_array().unwrap().len(), 2);
        assert!(s.end_user("cust-new").await.unwrap().unwrap().blocked);
        call(
            s,
            Method::POST,
            "/customer/unblock",
            "",
            json!({"user_ids": ["cust-new"]}),
        )
        .await;
        assert!(!s.end_user("cust-new").await.unwrap().unwrap().blocked);
        let all = call(s, Method::GET, "/customer/list", "", Value::Null).await;
        assert_eq!(all.as_array().unwrap().len(), 2);
        call(
            s,
            Method::POST,
            "/customer/delete",
            "",
            json!({"user_ids": ["cust-new"]}),
        )
        .await;
        call(
            s,
            Method::POST,
            "/team/delete",
            "",
            json!({"team_ids": [team_id]}),
        )
        .await;
        assert!(call(s, Method::GET, "/team/list", "", Value::Null)
            .await
            .as_array()
            .unwrap()
            .is_empty());
    }
}

#[tokio::test]
async fn spend_logs_are_filtered_like_litellm() {
    for db in every_backend().await {
        let s = &db.store;
        let made = call(
            s,
            Method::POST,
            "/key/generate",
            "",
            json!({"user_id": "ann"}),
        )
        .await;
        let key = made["key"].as_str().unwrap().to_owned();
        let day1 = time::macros::datetime!(2026-03-01 12:00 UTC);
        let mut logs = Vec::new();
        for (i, at) in [
            day1,
            day1 + time::Duration::days(1),
            day1 + time::Duration::days(2),
        ]
        .into_iter()
        .enumerate()
        {
            let mut l = SpendLog::new(format!("req-{i}"), "gpt-4o".into(), at);
            l.api_key = Some(KeyHash::of(&key));
            l.user_id = Some("ann".into());
            l.usage = Usage {
                prompt_tokens: 100,
                completion_tokens: 10,
                cached_tokens: 30,
                cache_creation_tokens: 5,
                reasoning_tokens: 2,
                ..Usage::default()
            };
            l.spend = 0.5;
            logs.push(l);
        }
        s.write_spend_batch(&logs).await.unwrap();
        let got = call(
            s,
            Method::GET,
            "/spend/logs",
            &format!("api_key={key}&start_date=2026-03-02&end_date=2026-03-03"),
            Value::Null,
        )
        .await;
        let ids: Vec<&str> = got
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["request_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids, ["req-2", "req-1"]);
        // The list as `GET /spend/logs` sends it, serialised straight to bytes
        // (`call_bytes`), is byte for byte the list as a `Value` (how every other answer goes).
        let all = call(s, Method::GET, "/spend/logs", "", Value::Null).await;
        let direct = super::spend::logs(
            s,
            AdminRequest {
                query: "",
                body: b"",
            },
        )
        .await
        .unwrap();
        assert_eq!(
            String::from_utf8(serde_json::to_vec(&direct).unwrap()).unwrap(),
            all.to_string()
        );
        assert_eq!(got[0]["total_tokens"], 110);
        assert_eq!(got[0]["cache_creation_tokens"], 5);
        assert_eq!(got[0]["api_key"], KeyHash::of(&key).as_str());
        let one = call(
            s,
            Method::GET,
            "/spend/logs",
            "request_id=req-0&user_id=ann",
            Value::Null,
        )
        .await;
        assert_eq!(one.as_array().unwrap().len(), 1);
        let e = fails(s, Method::GET, "/spend/logs", "start_date=yesterday", "").await;
        assert_eq!(e.param(), Some("start_date"));
        // The key's spend, as /key/info shows it.
        let info = call(
            s,
            Method::GET,
            "/key/info",
            &format!("key={key}"),
            Value::Null,
        )
        .await;
        assert_eq!(info["info"]["spend"], 1.5);
    }
}

#[tokio::test]
async fn object_permission_is_litellms_top_level_field() {
    for db in every_backend().await {
        let s = &db.store;
        let op = json!({"mcp_servers": ["github"], "mcp_tool_permissions": {"github": ["create_issue"]}});
        let made = call(
            s,
            Method::POST,
            "/key/generate",
            "",
            json!({"key_alias": "agent", "object_permission": op, "metadata": {"team": "x"}}),
        )
        .await;
        assert_eq!(made["object_permission"], op);
        // Kept in `metadata` (where the MCP gateway reads it) but shown beside it, as
        // LiteLLM shows its column: the `metadata` a client sent is what it reads back.
        assert!(made["metadata"].get("object_permission").is_none());
        assert_eq!(made["metadata"]["team"], "x");
        let key = made["key"].as_str().unwrap().to_owned();
        let info = call(
            s,
            Method::GET,
            "/key/info",
            &format!("key={key}"),
            Value::Null,
        )
        .await;
        assert_eq!(info["info"]["object_permission"], op);
        let cleared = call(
            s,
            Method::POST,
            "/key/update",
            "",
            json!({"key": key, "object_permission": null}),
        )
        .await;
        assert!(cleared["object_permission"].is_null());
        assert_eq!(cleared["metadata"]["team"], "x");
        let team = call(
            s,
            Method::POST,
            "/team/new",
            "",
            json!({"team_id": "agents", "object_permission": {"mcp_servers": ["github"]}}),
        )
        .await;
        assert_eq!(team["object_permission"]["mcp_servers"], json!(["github"]));
        for bad in [
            r#"{"object_permission": {"mcp_servers": "github"}}"#,
            r#"{"object_permission": {"mcp_tool_permissions": {"github": "create_issue"}}}"#,
            r#"{"object_permission": ["github"]}"#,
        ] {
            match fails(s, Method::POST, "/key/generate", "", bad).await {
                ApiError::InvalidParam { param, .. } => assert_eq!(param, "object_permission"),
                other => panic!("{bad}: {other}"),
            }
        }
    }
}

/// A user's team and the team's members agree whichever side changed them: `/user/new` and
/// `/user/update` with a `team_id` make the user a member, `/team/member_add` gives a user
/// without a team that team, `/team/member_delete` takes it away.
#[tokio::test]
async fn team_membership_agrees_from_both_sides() {
    for db in every_backend().await {
        let s = &db.store;
        for t in ["red", "blue"] {
            call(s, Method::POST, "/team/new", "", json!({ "team_id": t })).await;
        }
        let members = |team: &'static str| async move {
            let info = call(
                s,
                Method::GET,
                "/team/info",
                &format!("team_id={team}"),
                Value::Null,
            )
            .await;
            let mut ids: Vec<String> = info["team_info"]["members_with_roles"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["user_id"].as_str().unwrap().to_owned())
                .collect();
            ids.sort();
            ids
        };
        let team_of = |user: &'static str| async move {
            call(
                s,
                Method::GET,
                "/user/info",
                &format!("user_id={user}"),
                Value::Null,
            )
            .await["user_info"]["team_id"]
                .as_str()
                .map(str::to_owned)
        };
        call(
            s,
            Method::POST,
            "/user/new",
            "",
            json!({"user_id": "ana", "team_id": "red", "auto_create_key": false}),
        )
        .await;
        assert_eq!(members("red").await, ["ana"]);
        // Moved to another team on the user's side: now a member there too.
        call(
            s,
            Method::POST,
            "/user/update",
            "",
            json!({"user_id": "ana", "team_id": "blue"}),
        )
        .await;
        assert_eq!(team_of("ana").await.as_deref(), Some("blue"));
        assert_eq!(members("blue").await, ["ana"]);
        // A team admin who is updated keeps their role.
        call(
            s,
            Method::POST,
            "/team/member_update",
            "",
            json!({"team_id": "blue", "user_id": "ana", "role": "admin"}),
        )
        .await;
        call(
            s,
            Method::POST,
            "/user/update",
            "",
            json!({"user_id": "ana", "team_id": "blue", "user_email": "ana@example.com"}),
        )
        .await;
        let info = call(s, Method::GET, "/team/info", "team_id=blue", Value::Null).await;
        assert_eq!(info["team_info"]["members_with_roles"][0]["role"], "admin");
        // A new team must exist.
        let e = fails(
            s,
            Method::POST,
            "/user/update",
            "",
            r#"{"user_id": "ana", "team_id": "nope"}"#,
        )
        .await;
        assert!(
            matches!(
                e,
                ApiError::InvalidParam {
                    param: "team_id",
                    ..
                }
            ),
            "{e:?}"
        );
        // From the team's side: a user without a team gets this one.
        call(
            s,
            Method::POST,
            "/user/new",
            "",
            json!({"user_id": "bo", "auto_create_key": false}),
        )
        .await;
        call(
            s,
            Method::POST,
            "/team/member_add",
            "",
            json!({"team_id": "red", "member": {"user_id": "bo", "role": "user"}}),
        )
        .await;
        assert_eq!(team_of("bo").await.as_deref(), Some("red"));
        assert_eq!(members("red").await, ["ana", "bo"]);
        call(
            s,
            Method::POST,
            "/team/member_delete",
            "",
            json!({"team_id": "red", "user_id": "bo"}),
        )
        .await;
        assert_eq!(team_of("bo").await, None);
        assert_eq!(members("red").await, ["ana"]);
    }
}
