//! Deployments managed at run time (`store_model_in_db`): `/model/new`, `/model/update`,
//! `/model/delete`, `/model/info` against the real server and store. A deployment added is
//! served at once (and after a restart), a bad one is refused by its field, a file's cannot be
//! changed through the API, stored keys are sealed, a stream in flight survives the change,
//! and with PostgreSQL and Redis a deployment added on one instance is served by another
//! within a second.
use std::time::{Duration, Instant};

use crate::common::*;
use serde_json::{json, Value};
use sluice_mock::MockSettings;

const MASTER: &str = "sk-master-models";

fn config(extra_general: &str, more: &str) -> String {
    format!(
        r#"
model_list:
  - model_name: cheap
    litellm_params:
      model: mock/cheap
    model_info:
      id: file-cheap
{more}
general_settings:
  master_key: {MASTER}
  store_model_in_db: true
{extra_general}"#
    )
}

async fn admin(gw: &Gateway, method: &str, path: &str, body: Value) -> Answer {
    admin_as(gw, MASTER, method, path, body).await
}

async fn chat(gw: &Gateway, model: &str) -> Answer {
    let auth = format!("Bearer {MASTER}");
    send(
        "POST",
        &gw.url("/v1/chat/completions"),
        json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}).to_string(),
        &[
            ("content-type", "application/json"),
            ("authorization", &auth),
        ],
    )
    .await
}

#[tokio::test]
async fn deployments_are_added_changed_and_removed_at_run_time() {
    let dir = temp_dir();
    let gw = gateway_in(&config("", ""), &dir).await;
    let info = admin(&gw, "GET", "/model/info", Value::Null).await;
    assert_eq!(info.status, 200, "{}", info.text());
    let data = info.json()["data"].as_array().unwrap().clone();
    assert_eq!(data.len(), 1);
    assert_eq!(data[0]["model_info"]["id"], "file-cheap");
    assert_eq!(data[0]["model_info"]["db_model"], false);
    assert_eq!(chat(&gw, "added").await.status, 404);

    // Added: served at once, listed, its key sealed in the database and masked in answers.
    let made = admin(
        &gw,
        "POST",
        "/model/new",
        json!({
            "model_name": "added",
            "litellm_params": {"model": "mock/added", "api_key": "sk-upstream-secret-0123456789", "rpm": 100},
            "model_info": {"mode": "chat"}
        }),
    )
    .await;
    assert_eq!(made.status, 200, "{}", made.text());
    assert!(
        !made.text().contains("sk-upstream-secret-0123456789"),
        "{}",
        made.text()
    );
    let id = made.json()["model_id"].as_str().unwrap().to_owned();
    assert_eq!(made.json()["model_info"]["db_model"], true);
    assert_eq!(
        chat(&gw, "added").await.status,
        200,
        "served before the answer"
    );
    let auth = format!("Bearer {MASTER}");
    let listed = send(
        "GET",
        &gw.url("/v1/models"),
        "",
        &[("authorization", &auth)],
    )
    .await;
    assert!(listed.text().contains("\"added\""), "{}", listed.text());
    let info = admin(
        &gw,
        "GET",
        &format!("/v1/model/info?litellm_model_id={id}"),
        Value::Null,
    )
    .await;
    let data = info.json()["data"].as_array().unwrap().clone();
    assert_eq!(data.len(), 1, "{}", info.text());
    assert_eq!(data[0]["model_name"], "added");
    assert_eq!(data[0]["model_info"]["db_model"], true);
    assert_eq!(data[0]["model_info"]["created_by"], "admin");
    assert!(!info.text().contains("sk-upstream-secret-0123456789"));
    let store = gw.state.store().unwrap().store.clone();
    let rows = store.models().await.unwrap();
    assert_eq!(rows.len(), 1);
    assert!(rows[0].litellm_params.starts_with("sealed:v1:"));
    assert!(!rows[0].litellm_params.contains("sk-upstream"));

    // Refused, by the field at fault, and nothing stored.
    let bad = admin(
        &gw,
        "POST",
        "/model/new",
        json!({"model_name": "bad", "litellm_params": {"model": "mock/bad", "rpm": "lots"}}),
    )
    .await;
    assert_eq!(bad.status, 400, "{}", bad.text());
    assert!(bad.text().contains("litellm_params.rpm"), "{}", bad.text());
    let typo = admin(
        &gw,
        "POST",
        "/model/new",
        json!({"model_name": "bad", "litellm_parms": {"model": "mock/bad"}}),
    )
    .await;
    assert_eq!(typo.status, 400, "{}", typo.text());
    assert!(typo.text().contains("litellm_parms"));
    let no_model = admin(
        &gw,
        "POST",
        "/model/new",
        json!({"model_name": "bad", "litellm_params": {}}),
    )
    .await;
    assert_eq!(no_model.status, 400, "{}", no_model.text());
    let taken = admin(
        &gw,
        "POST",
        "/model/new",
        json!({"model_name": "x", "litellm_params": {"model": "mock/x"}, "model_info": {"id": "file-cheap"}}),
    )
    .await;
    assert_eq!(taken.status, 409, "{}", taken.text());
    assert_eq!(store.models().await.unwrap().len(), 1);

    // Changed: renamed and repointed; the old name is gone.
    let changed = admin(
        &gw,
        "POST",
        "/model/update",
        json!({"model_name": "renamed", "model_info": {"id": id}, "litellm_params": {"rpm": null}}),
    )
    .await;
    assert_eq!(changed.status, 200, "{}", changed.text());
    assert_eq!(changed.json()["litellm_params"]["model"], "mock/added");
    assert!(changed.json()["litellm_params"].get("rpm").is_none());
    assert_eq!(chat(&gw, "renamed").await.status, 200);
    assert_eq!(chat(&gw, "added").await.status, 404);
    let patched = admin(
        &gw,
        "PATCH",
        &format!("/model/{id}/update"),
        json!({"litellm_params": {"tpm": 1000}}),
    )
    .await;
    assert_eq!(patched.status, 200, "{}", patched.text());
    assert_eq!(patched.json()["litellm_params"]["tpm"], 1000);
    let file = admin(
        &gw,
        "POST",
        "/model/update",
        json!({"model_info": {"id": "file-cheap"}, "litellm_params": {"rpm": 1}}),
    )
    .await;
    assert_eq!(file.status, 400, "{}", file.text());
    assert!(file.text().contains("config file"), "{}", file.text());

    // A restart serves what is stored.
    drop(gw);
    let gw = gateway_in(&config("", ""), &dir).await;
    assert_eq!(
        chat(&gw, "renamed").await.status,
        200,
        "stored deployments survive a restart"
    );

    // Removed: no longer served; a second delete is a 404; the file's cannot be.
    let gone = admin(&gw, "POST", "/model/delete", json!({"id": id})).await;
    assert_eq!(gone.status, 200, "{}", gone.text());
    assert_eq!(chat(&gw, "renamed").await.status, 404);
    assert_eq!(
        admin(&gw, "POST", "/model/delete", json!({"id": id}))
            .await
            .status,
        404
    );
    assert_eq!(
        admin(&gw, "POST", "/model/delete", json!({"id": "file-cheap"}))
            .await
            .status,
        400
    );
    assert_eq!(chat(&gw, "cheap").await.status, 200);

    // Every change is in the audit log, keys masked.
    let audit = admin(&gw, "GET", "/audit?table_name=models", Value::Null).await;
    let actions: Vec<String> = audit.json()["audit_logs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        actions,
        ["deleted", "updated", "updated", "created"],
        "{}",
        audit.text()
    );
    assert!(!audit.text().contains("sk-upstream-secret-0123456789"));
}

#[tokio::test]
async fn without_store_model_in_db_the_model_api_only_reads() {
    let cfg = config("", "").replace("  store_model_in_db: true\n", "");
    let gw = gateway(&cfg).await;
    let made = admin(
        &gw,
        "POST",
        "/model/new",
        json!({"model_name": "added", "litellm_params": {"model": "mock/added"}}),
    )
    .await;
    assert_eq!(made.status, 400, "{}", made.text());
    assert!(made.text().contains("store_model_in_db"), "{}", made.text());
    assert_eq!(
        admin(&gw, "GET", "/model/info", Value::Null).await.status,
        200
    );
    assert_eq!(
        admin(&gw, "GET", "/model/new", Value::Null).await.status,
        405
    );
    // The management API's key is required.
    let anon = send("GET", &gw.url("/model/info"), "", &[]).await;
    assert_eq!(anon.status, 401);
}

/// A stream in flight keeps going while a deployment is added (it keeps the snapshot it
/// started with).
#[tokio::test]
async fn a_change_does_not_drop_requests_in_flight() {
    let mock = mock_server(MockSettings {
        chunks: 20,
        chunk_interval: Duration::from_millis(25),
        ..MockSettings::default()
    })
    .await;
    let more = format!(
        "  - model_name: slow\n    litellm_params:\n      model: openai/gpt-4o-mini\n      api_base: {}\n      api_key: sk-mock\n",
        mock.base()
    );
    let gw = gateway(&config("", &more)).await;
    let url = gw.url("/v1/chat/completions");
    let auth = format!("Bearer {MASTER}");
    let stream = tokio::spawn(async move {
        send(
            "POST",
            &url,
            r#"{"model":"slow","stream":true,"messages":[{"role":"user","content":"hi"}]}"#,
            &[
                ("content-type", "application/json"),
                ("authorization", &auth),
            ],
        )
        .await
    });
    // Added while the stream is under way.
    until_in_flight(&gw.addr.to_string(), MASTER, 1).await;
    let made = admin(
        &gw,
        "POST",
        "/model/new",
        json!({"model_name": "added", "litellm_params": {"model": "mock/added"}}),
    )
    .await;
    assert_eq!(made.status, 200, "{}", made.text());
    let answer = stream.await.unwrap();
    assert_eq!(answer.status, 200);
    assert!(!answer.body_error);
    assert_eq!(answer.sse_data().last().map(String::as_str), Some("[DONE]"));
    assert_eq!(chat(&gw, "added").await.status, 200);
}

/// Two instances on one PostgreSQL and one Redis: a deployment added, changed or removed on
/// one is served (or not) by the other within a second.
#[tokio::test]
async fn a_fleet_serves_a_deployment_added_on_either_within_a_second() {
    let (Some(server), Some(redis)) = (postgres_server("SLUICE_TEST_POSTGRES_URL"), redis_server())
    else {
        return;
    };
    let db = postgres_database(&server).await;
    let cfg = config(
        &format!("  database_url: {db}\nrouter_settings:\n  redis_url: {redis}\n"),
        "",
    );
    let a = gateway(&cfg).await;
    let b = gateway(&cfg).await;
    let up = |gw: &Gateway| {
        let ready = gw.url("/health/readiness");
        async move { get(&ready).await.json()["redis"] == "connected" }
    };
    assert!(eventually(PATIENCE, || up(&a)).await);
    assert!(eventually(PATIENCE, || up(&b)).await);
    assert_eq!(chat(&b, "added").await.status, 404);
    let made = admin(
        &a,
        "POST",
        "/model/new",
        json!({"model_name": "added", "litellm_params": {"model": "mock/added"}}),
    )
    .await;
    assert_eq!(made.status, 200, "{}", made.text());
    let id = made.json()["model_id"].as_str().unwrap().to_owned();
    let t = Instant::now();
    let served = eventually(Duration::from_secs(1), || async {
        chat(&b, "added").await.status == 200
    })
    .await;
    assert!(served, "B serves the deployment A added within a second");
    eprintln!(
        "a deployment added on A was served by B after {:?}",
        t.elapsed()
    );
    let gone = admin(&b, "POST", "/model/delete", json!({"id": id})).await;
    assert_eq!(gone.status, 200, "{}", gone.text());
    let removed = eventually(Duration::from_secs(1), || async {
        chat(&a, "added").await.status == 404
    })
    .await;
    assert!(
        removed,
        "A stops serving the deployment B removed within a second"
    );
}

/// The console's models page: an admin adds a deployment from the form, it is served, then
/// edits and removes it; a file's deployment has no edit link; a bad value is a 400.
#[tokio::test]
async fn the_console_adds_edits_and_removes_a_deployment() {
    let gw = gateway(&config("", "")).await;
    let mut b = Browser::default();
    assert_eq!(b.sign_in(&gw, "", MASTER).await.status, 303);
    let page = b.get(&gw, "/ui/models").await;
    assert_eq!(page.status, 200, "{}", page.text());
    let html = page.text();
    assert!(html.contains(r#"action="/ui/models/new""#), "{html}");
    assert!(
        !html.contains("/ui/models/edit?id=file-cheap"),
        "the file's is not editable"
    );
    let csrf = csrf_of(&html);
    let form = |name: &'static str, rpm: &'static str| {
        vec![
            ("model_name", name),
            ("model", "mock/console"),
            ("api_key", "sk-console-upstream-987654321"),
            ("rpm", rpm),
            ("mode", "chat"),
        ]
    };
    let mut bad = form("from-console", "many");
    bad.push(("csrf", &csrf));
    assert_eq!(b.post(&gw, "/ui/models/new", &bad).await.status, 400);
    let mut good = form("from-console", "60");
    good.push(("csrf", &csrf));
    let made = b.post(&gw, "/ui/models/new", &good).await;
    assert_eq!(made.status, 303, "{}", made.text());
    assert_eq!(chat(&gw, "from-console").await.status, 200);

    let info = admin(&gw, "GET", "/model/info", Value::Null).await.json();
    let stored = info["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["model_name"] == "from-console")
        .unwrap()
        .clone();
    let id = stored["model_info"]["id"].as_str().unwrap().to_owned();
    assert_eq!(stored["litellm_params"]["rpm"], 60);
    assert_eq!(stored["model_info"]["created_by"], "admin");
    let list = b.get(&gw, "/ui/models").await.text();
    assert!(list.contains(&format!("/ui/models/edit?id={id}")), "{list}");
    let edit = b.get(&gw, &format!("/ui/models/edit?id={id}")).await;
    assert_eq!(edit.status, 200, "{}", edit.text());
    assert!(
        !edit.text().contains("sk-console-upstream-987654321"),
        "the key is never shown"
    );
    let saved = b
        .post(
            &gw,
            "/ui/models/update",
            &[
                ("csrf", &csrf),
                ("id", &id),
                ("model_name", "renamed-in-console"),
                ("model", "mock/console"),
                ("api_key", ""),
                ("rpm", ""),
                ("mode", "chat"),
            ],
        )
        .await;
    assert_eq!(saved.status, 303, "{}", saved.text());
    assert_eq!(chat(&gw, "renamed-in-console").await.status, 200);
    assert_eq!(chat(&gw, "from-console").await.status, 404);
    let after = admin(
        &gw,
        "GET",
        &format!("/model/info?litellm_model_id={id}"),
        Value::Null,
    )
    .await
    .json();
    assert!(
        after["data"][0]["litellm_params"].get("rpm").is_none(),
        "blank removes the limit"
    );
    let rt = gw.state.runtime().unwrap();
    let row = rt.store().model(&id).await.unwrap().unwrap();
    assert_eq!(
        rt.params(&row).unwrap()["api_key"],
        "sk-console-upstream-987654321",
        "blank keeps the key"
    );
    let removed = b
        .post(
            &gw,
            "/ui/models/delete",
            &[("csrf", &csrf), ("id", &id), ("confirmed", "yes")],
        )
        .await;
    assert_eq!(removed.status, 303, "{}", removed.text());
    assert_eq!(chat(&gw, "renamed-in-console").await.status, 404);
    // Without the session's token nothing changes.
    let forged = b.post(&gw, "/ui/models/new", &form("forged", "1")).await;
    assert_eq!(forged.status, 403);
    assert_eq!(chat(&gw, "forged").await.status, 404);
}

/// The real binary: stored deployments are served after a restart of the process and kept
/// over a SIGHUP reload of the file (which brings the file's own change too).
#[tokio::test]
async fn the_binary_keeps_stored_deployments_over_a_reload() {
    let file = |group: &str| {
        format!(
            "model_list:\n  - model_name: {group}\n    litellm_params: {{model: mock/{group}}}\ngeneral_settings:\n  master_key: {MASTER}\n  store_model_in_db: true\n"
        )
    };
    let mut served = serve_binary(&file("from-file"), &[] as &[&str]).unwrap();
    let url = |path: &str| format!("http://{}{path}", served.addr);
    let auth = format!("Bearer {MASTER}");
    let headers = [
        ("content-type", "application/json"),
        ("authorization", auth.as_str()),
    ];
    let ask = |model: &str| {
        let body =
            json!({"model": model, "messages": [{"role": "user", "content": "hi"}]}).to_string();
        let url = url("/v1/chat/completions");
        async move { send("POST", &url, body, &headers).await.status }
    };
    let made = send(
        "POST",
        &url("/model/new"),
        json!({"model_name": "stored", "litellm_params": {"model": "mock/stored"}}).to_string(),
        &headers,
    )
    .await;
    assert_eq!(made.status, 200, "{}", made.text());
    assert_eq!(ask("stored").await, 200);
    std::fs::write(&served.cfg, file("edited-file")).unwrap();
    let hup = std::process::Command::new("kill")
        .args(["-HUP", &served.child.id().to_string()])
        .status()
        .unwrap();
    assert!(hup.success());
    assert!(
        eventually(PATIENCE, || async { ask("edited-file").await == 200 }).await,
        "reload not seen"
    );
    assert_eq!(
        ask("stored").await,
        200,
        "the stored deployment survives the reload"
    );
    assert_eq!(ask("from-file").await, 404);
    let log = std::fs::read_to_string(&served.log).unwrap_or_default();
    let _ = std::process::Command::new("kill")
        .args(["-TERM", &served.child.id().to_string()])
        .status();
    assert_eq!(served.child.wait().unwrap().code(), Some(0), "{log}");
}

/// LiteLLM's `/access_group/*`: a named set of stored deployments' groups that a key's
/// `models` may name; made, listed, changed and deleted through the API, each change served
/// at once.
#[tokio::test]
async fn access_groups_are_made_changed_and_deleted() {
    let gw = gateway(&config("", "")).await;
    for (name, id) in [("alpha", "a-1"), ("beta", "b-1")] {
        let added = admin(
            &gw,
            "POST",
            "/model/new",
            json!({"model_name": name, "litellm_params": {"model": "mock/x"}, "model_info": {"id": id}}),
        )
        .await;
        assert_eq!(added.status, 200, "{}", added.text());
    }
    let made = admin(
        &gw,
        "POST",
        "/access_group/new",
        json!({"access_group": "prod", "model_names": ["alpha"]}),
    )
    .await;
    assert_eq!(made.status, 200, "{}", made.text());
    assert_eq!(made.json()["models_updated"], 1);
    let again = admin(
        &gw,
        "POST",
        "/access_group/new",
        json!({"access_group": "prod", "model_names": ["beta"]}),
    )
    .await;
    assert_eq!(again.status, 409, "{}", again.text());
    // A group of the file (not stored) cannot be put in one: 400 naming it.
    let file = admin(
        &gw,
        "POST",
        "/access_group/new",
        json!({"access_group": "x", "model_names": ["cheap"]}),
    )
    .await;
    assert_eq!(file.status, 400, "{}", file.text());
    // A key allowed the access group reaches its groups, and only those.
    let made_key = admin(&gw, "POST", "/key/generate", json!({"models": ["prod"]})).await;
    let key = made_key.json()["key"].as_str().unwrap().to_owned();
    let call = |model: &'static str| {
        let (gw, key) = (&gw, key.clone());
        async move {
            let auth = format!("Bearer {key}");
            send(
                "POST",
                &gw.url("/v1/chat/completions"),
                json!({"model": model, "messages": [{"role": "user", "content": "hi"}]})
                    .to_string(),
                &[
                    ("content-type", "application/json"),
                    ("authorization", &auth),
                ],
            )
            .await
            .status
        }
    };
    assert_eq!(call("alpha").await, 200);
    assert_eq!(call("beta").await, 401);
    let info = admin(&gw, "GET", "/access_group/prod/info", Value::Null).await;
    assert_eq!(
        info.json()["model_names"],
        json!(["alpha"]),
        "{}",
        info.text()
    );
    // Moved to beta: alpha refused, beta served.
    let moved = admin(
        &gw,
        "PUT",
        "/access_group/prod/update",
        json!({"model_names": ["beta"]}),
    )
    .await;
    assert_eq!(moved.status, 200, "{}", moved.text());
    assert_eq!(call("alpha").await, 401);
    assert_eq!(call("beta").await, 200);
    let list = admin(&gw, "GET", "/access_group/list", Value::Null).await;
    assert_eq!(list.json()["access_groups"][0]["deployment_count"], 1);
    let gone = admin(&gw, "DELETE", "/access_group/prod/delete", Value::Null).await;
    assert_eq!(gone.status, 200, "{}", gone.text());
    assert_eq!(call("beta").await, 401);
    let missing = admin(&gw, "GET", "/access_group/prod/info", Value::Null).await;
    assert_eq!(missing.status, 404);
}
