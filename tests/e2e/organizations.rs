//! Organizations and budgets as objects, end to end through the management API and the
//! gateway, on SQLite and on PostgreSQL: a budget, an organization with models and that budget,
//! a team and keys under it; a key refused a model outside the organization's list (the same
//! refusal as any model access), the organization's budget spent by its keys together,
//! `/budget/update` reaching every holder of a budget (an end user's too), members with roles,
//! and LiteLLM's request shapes (GET and POST list, POST info, 19 organizations with one alias).

use crate::common::*;
use serde_json::{json, Value};

const MASTER: &str = "sk-master-orgs";

fn config(database_url: Option<&str>) -> String {
    let db = database_url
        .map(|u| format!("  database_url: {u}\n"))
        .unwrap_or_default();
    format!(
        r#"
model_list:
  - model_name: cheap
    litellm_params:
      model: mock/cheap
      input_cost_per_token: 0.000001
      output_cost_per_token: 0.000002
  - model_name: dear
    litellm_params:
      model: mock/dear
general_settings:
  master_key: {MASTER}
  proxy_batch_write_at: 0.2
{db}"#
    )
}

async fn admin(gw: &Gateway, method: &str, path: &str, body: Value) -> Answer {
    admin_as(gw, MASTER, method, path, body).await
}

async fn ok(gw: &Gateway, method: &str, path: &str, body: Value) -> Value {
    let a = admin(gw, method, path, body).await;
    assert_eq!(a.status, 200, "{method} {path}: {}", a.text());
    a.json()
}

async fn chat(gw: &Gateway, key: &str, model: &str) -> Answer {
    let auth = format!("Bearer {key}");
    send(
        "POST",
        &gw.url("/v1/chat/completions"),
        format!(r#"{{"model":"{model}","messages":[{{"role":"user","content":"hi"}}]}}"#),
        &[
            ("content-type", "application/json"),
            ("authorization", &auth),
        ],
    )
    .await
}

fn message(a: &Answer) -> String {
    a.json()["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

async fn organizations_and_budgets(gw: &Gateway) {
    // A budget, and an organization that takes it.
    let b = ok(
        gw,
        "POST",
        "/budget/new",
        json!({"budget_id": "b-org", "max_budget": 0.00005, "soft_budget": 0.00004}),
    )
    .await;
    assert_eq!(b["max_budget"], 0.00005);
    let org = ok(
        gw,
        "POST",
        "/organization/new",
        json!({"organization_alias": "acme", "models": ["cheap"], "budget_id": "b-org"}),
    )
    .await;
    let org_id = org["organization_id"].as_str().unwrap().to_owned();
    assert_eq!(org["budget_id"], "b-org");
    assert_eq!(org["litellm_budget_table"]["max_budget"], 0.00005);
    assert_eq!(org["models"], json!(["cheap"]));

    // A field LiteLLM does not know, a missing organization, both budget_id and max_budget.
    let a = admin(
        gw,
        "POST",
        "/organization/new",
        json!({"organization_alias": "x", "max_budjet": 1}),
    )
    .await;
    assert_eq!(a.status, 400);
    assert!(a.text().contains("max_budjet"), "{}", a.text());
    let a = admin(
        gw,
        "POST",
        "/team/new",
        json!({"team_id": "t-lost", "organization_id": "no-such-org"}),
    )
    .await;
    assert_eq!(a.status, 400);
    assert!(a.text().contains("organization_id"), "{}", a.text());
    let a = admin(
        gw,
        "POST",
        "/key/generate",
        json!({"organization_id": "no-such-org"}),
    )
    .await;
    assert_eq!(a.status, 400);
    assert!(a.text().contains("organization_id"), "{}", a.text());

    // A team under the organization, a key in the team, and a key under the organization.
    let team = ok(
        gw,
        "POST",
        "/team/new",
        json!({"team_id": "t-acme", "organization_id": org_id}),
    )
    .await;
    assert_eq!(team["organization_id"], org_id.as_str());
    let made = ok(gw, "POST", "/key/generate", json!({"team_id": "t-acme"})).await;
    let team_key = made["key"].as_str().unwrap().to_owned();
    let made = ok(
        gw,
        "POST",
        "/key/generate",
        json!({"organization_id": org_id}),
    )
    .await;
    assert_eq!(made["organization_id"], org_id.as_str());
    let org_key = made["key"].as_str().unwrap().to_owned();
    let made = ok(gw, "POST", "/key/generate", json!({"models": ["cheap"]})).await;
    let narrow_key = made["key"].as_str().unwrap().to_owned();

    // A model outside the organization's list: refused as the key's own list refuses it.
    let by_key = chat(gw, &narrow_key, "dear").await;
    let by_org = chat(gw, &team_key, "dear").await;
    assert_eq!(by_key.status, 401, "{}", by_key.text());
    assert_eq!(by_org.status, by_key.status, "{}", by_org.text());
    // LiteLLM's types name whose list refused it.
    assert_eq!(by_key.json()["error"]["type"], "key_model_access_denied");
    assert_eq!(
        by_org.json()["error"]["type"],
        "organization_model_access_denied"
    );
    assert_eq!(
        by_org.json()["error"]["code"],
        by_key.json()["error"]["code"]
    );
    assert!(
        message(&by_org).contains("organization"),
        "{}",
        by_org.text()
    );
    assert_eq!(chat(gw, &org_key, "dear").await.status, 401);

    // The organization's budget runs out for all its keys together.
    let mut refused = None;
    for i in 0..200 {
        let key = if i % 2 == 0 { &team_key } else { &org_key };
        let a = chat(gw, key, "cheap").await;
        if a.status != 200 {
            refused = Some(a);
            break;
        }
    }
    let r = refused.expect("the organization's budget runs out");
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.json()["error"]["type"], "budget_exceeded");
    assert!(message(&r).contains("organization"), "{}", r.text());
    assert_eq!(chat(gw, &team_key, "cheap").await.status, 400);
    assert_eq!(chat(gw, &org_key, "cheap").await.status, 400);
    // A key under no organization is not held to it.
    assert_eq!(chat(gw, &narrow_key, "cheap").await.status, 200);

    // The spend reaches the organization's row, and info shows its team and budget.
    let info_path = format!("/organization/info?organization_id={org_id}");
    let spent = eventually(PATIENCE, || async {
        let info = admin(gw, "GET", &info_path, Value::Null).await.json();
        info["spend"].as_f64().unwrap_or(0.0) > 0.0
    })
    .await;
    assert!(spent, "the organization's spend is written");
    let info = ok(gw, "GET", &info_path, Value::Null).await;
    assert_eq!(info["teams"][0]["team_id"], "t-acme");
    assert_eq!(info["litellm_budget_table"]["budget_id"], "b-org");
    assert_eq!(info["litellm_budget_table"]["soft_budget"], 0.00004);

    // /budget/update reaches the organization at once: its keys are admitted again.
    let b = ok(
        gw,
        "POST",
        "/budget/update",
        json!({"budget_id": "b-org", "max_budget": 100.0}),
    )
    .await;
    assert_eq!(b["max_budget"], 100.0);
    assert_eq!(chat(gw, &team_key, "cheap").await.status, 200);
    let info = ok(gw, "GET", &info_path, Value::Null).await;
    assert_eq!(info["litellm_budget_table"]["max_budget"], 100.0);
    // /organization/update's budget fields change its budget.
    let up = ok(
        gw,
        "PATCH",
        "/organization/update",
        json!({"organization_id": org_id, "rpm_limit": 1000, "models": ["cheap", "dear"]}),
    )
    .await;
    assert_eq!(up["litellm_budget_table"]["rpm_limit"], 1000);
    assert_eq!(chat(gw, &team_key, "dear").await.status, 200);
    let listed = ok(gw, "POST", "/budget/info", json!({"budgets": ["b-org"]})).await;
    assert_eq!(listed[0]["rpm_limit"], 1000);

    // An end user that names a budget takes it, and follows its updates.
    ok(
        gw,
        "POST",
        "/budget/new",
        json!({"budget_id": "b-cust", "max_budget": 1.0, "budget_duration": "30d"}),
    )
    .await;
    let c = ok(
        gw,
        "POST",
        "/customer/new",
        json!({"user_id": "cust-1", "budget_id": "b-cust"}),
    )
    .await;
    assert_eq!(c["budget_id"], "b-cust");
    assert_eq!(c["litellm_budget_table"]["max_budget"], 1.0);
    let both = admin(
        gw,
        "POST",
        "/customer/new",
        json!({"user_id": "cust-2", "budget_id": "b-cust", "max_budget": 3.0}),
    )
    .await;
    assert_eq!(both.status, 400, "{}", both.text());
    ok(
        gw,
        "POST",
        "/budget/update",
        json!({"budget_id": "b-cust", "max_budget": 2.0}),
    )
    .await;
    let c = ok(gw, "GET", "/customer/info?end_user_id=cust-1", Value::Null).await;
    assert_eq!(c["litellm_budget_table"]["max_budget"], 2.0, "{c}");
    assert_eq!(c["litellm_budget_table"]["budget_duration"], "30d");
    let all = ok(gw, "GET", "/budget/list", Value::Null).await;
    assert_eq!(
        all.as_array().unwrap().len(),
        2,
        "b-org, b-cust and none else: {all}"
    );

    // Members with organization roles.
    let added = ok(
        gw,
        "POST",
        "/organization/member_add",
        json!({"organization_id": org_id, "member": [
            {"user_id": "ana", "role": "org_admin"},
            {"user_email": "bo@example.com", "role": "internal_user"}
        ], "max_budget_in_organization": 3.0}),
    )
    .await;
    assert_eq!(
        added["updated_organization_memberships"][0]["user_role"],
        "org_admin"
    );
    let a = admin(
        gw,
        "POST",
        "/organization/member_add",
        json!({"organization_id": org_id, "member": {"user_id": "cy", "role": "admin"}}),
    )
    .await;
    assert_eq!(a.status, 400, "{}", a.text());
    let m = ok(
        gw,
        "PATCH",
        "/organization/member_update",
        json!({"organization_id": org_id, "user_email": "bo@example.com", "role": "internal_user_viewer"}),
    )
    .await;
    assert_eq!(m["user_role"], "internal_user_viewer");
    ok(
        gw,
        "DELETE",
        "/organization/member_delete",
        json!({"organization_id": org_id, "user_id": "ana"}),
    )
    .await;
    let info = ok(gw, "GET", &info_path, Value::Null).await;
    assert_eq!(info["members"].as_array().unwrap().len(), 1, "{info}");

    // LiteLLM's other spellings: list by GET and POST, info by POST.
    for method in ["GET", "POST"] {
        let list = ok(gw, method, "/organization/list", Value::Null).await;
        assert!(list
            .as_array()
            .unwrap()
            .iter()
            .any(|o| o["organization_id"] == org_id.as_str()));
    }
    let many = ok(
        gw,
        "POST",
        "/organization/info",
        json!({"organizations": [org_id]}),
    )
    .await;
    assert_eq!(many[0]["organization_alias"], "acme");

    // A budget in use is kept; once its organization is gone it can go.
    let a = admin(gw, "POST", "/budget/delete", json!({"id": "b-org"})).await;
    assert_eq!(a.status, 400, "{}", a.text());
    let gone = ok(
        gw,
        "DELETE",
        "/organization/delete",
        json!({"organization_ids": [org_id]}),
    )
    .await;
    assert_eq!(gone[0]["organization_id"], org_id.as_str());
    // Its keys stay, no longer held to its models.
    assert_eq!(chat(gw, &org_key, "dear").await.status, 200);
    ok(gw, "POST", "/budget/delete", json!({"id": "b-org"})).await;
    let audit = ok(gw, "GET", "/audit?table_name=organizations", Value::Null).await;
    assert!(
        audit["audit_logs"].as_array().unwrap().len() >= 4,
        "{audit}"
    );
}

#[tokio::test]
async fn organizations_and_budgets_on_sqlite() {
    let gw = gateway(&config(None)).await;
    organizations_and_budgets(&gw).await;
}

#[tokio::test]
async fn organizations_and_budgets_on_postgres() {
    let Some(server) = postgres_server("SLUICE_TEST_POSTGRES_URL") else {
        return;
    };
    let db = postgres_database(&server).await;
    let gw = gateway(&config(Some(&db))).await;
    organizations_and_budgets(&gw).await;
}

/// LiteLLM's load tests create organizations in parallel under one alias: aliases need not be
/// unique, and each gets its own budget.
#[tokio::test]
async fn many_organizations_with_one_alias_at_once() {
    let gw = gateway(&config(None)).await;
    let calls = (0..19).map(|_| {
        admin(
            &gw,
            "POST",
            "/organization/new",
            json!({"organization_alias": "same", "max_budget": 1.0}),
        )
    });
    let answers = futures_util::future::join_all(calls).await;
    for a in &answers {
        assert_eq!(a.status, 200, "{}", a.text());
        assert_eq!(a.json()["litellm_budget_table"]["max_budget"], 1.0);
    }
    let list = ok(&gw, "GET", "/organization/list", Value::Null).await;
    assert_eq!(list.as_array().unwrap().len(), 19);
}
