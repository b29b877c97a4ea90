//! Team members with roles (LiteLLM's `members_with_roles`, `/team/member_add|update|delete`)
//! and the console's team admin: an internal user who is a team's `admin` sees and manages
//! the team's keys, members and logs — and nothing of another team's.

use crate::common::*;
use serde_json::{json, Value};

const MASTER: &str = "sk-master-teams";

fn config() -> String {
    format!(
        r#"
model_list:
  - model_name: cheap
    litellm_params:
      model: mock/cheap
general_settings:
  master_key: {MASTER}
  proxy_batch_write_at: 0.2
"#
    )
}

async fn admin(gw: &Gateway, method: &str, path: &str, body: Value) -> Answer {
    admin_as(gw, MASTER, method, path, body).await
}

async fn ok(gw: &Gateway, path: &str, body: Value) -> Value {
    let a = admin(gw, "POST", path, body).await;
    assert_eq!(a.status, 200, "{path}: {}", a.text());
    a.json()
}

fn roles(team: &Value) -> Vec<(String, String)> {
    team["members_with_roles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            (
                m["user_id"].as_str().unwrap().to_owned(),
                m["role"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// A deleted team leaves the directory with its live counters: its keys are no longer held to
/// it, and a team made again under the same id starts its minute from zero.
#[tokio::test]
async fn a_deleted_team_stops_holding_its_keys_and_a_new_one_starts_afresh() {
    let gw = gateway(&config()).await;
    ok(
        &gw,
        "/team/new",
        json!({"team_id": "t-reuse", "rpm_limit": 2}),
    )
    .await;
    let made = ok(&gw, "/key/generate", json!({"team_id": "t-reuse"})).await;
    let key = made["key"].as_str().unwrap().to_owned();
    let status = || async { chat_as(&gw, &key, "cheap", "", &[]).await.status.as_u16() };
    assert_eq!((status().await, status().await), (200, 200));
    assert_eq!(status().await, 429, "the team's rpm_limit 2");
    ok(&gw, "/team/delete", json!({"team_ids": ["t-reuse"]})).await;
    assert_eq!(status().await, 200, "no team, no team limit");
    ok(
        &gw,
        "/team/new",
        json!({"team_id": "t-reuse", "rpm_limit": 2}),
    )
    .await;
    // The key still names the team: held to the new one, whose minute is fresh (one request
    // was made above while there was no team).
    assert_eq!((status().await, status().await), (200, 200));
    assert_eq!(status().await, 429);
}

#[tokio::test]
async fn team_members_have_roles_through_the_api() {
    let gw = gateway(&config()).await;
    ok(&gw, "/team/new", json!({"team_id": "t-a"})).await;
    let t = ok(
        &gw,
        "/team/member_add",
        json!({"team_id": "t-a", "member": [{"user_id": "ana", "role": "admin"}, {"user_id": "bo"}]}),
    )
    .await;
    assert_eq!(
        roles(&t),
        [("ana".into(), "admin".into()), ("bo".into(), "user".into())]
    );
    // Members who did not exist are made, in the team.
    let ana = admin(&gw, "GET", "/user/info?user_id=ana", Value::Null)
        .await
        .json();
    assert_eq!(ana["user_info"]["team_id"], "t-a");
    assert_eq!(ana["user_info"]["user_role"], "internal_user");
    let t = ok(
        &gw,
        "/team/member_update",
        json!({"team_id": "t-a", "user_id": "bo", "role": "admin"}),
    )
    .await;
    assert_eq!(roles(&t)[1], ("bo".into(), "admin".into()));
    let info = admin(&gw, "GET", "/team/info?team_id=t-a", Value::Null)
        .await
        .json();
    assert_eq!(roles(&info["team_info"]).len(), 2);
    let list = admin(&gw, "GET", "/team/list", Value::Null).await.json();
    assert_eq!(roles(&list[0]).len(), 2);

    let bad = admin(
        &gw,
        "POST",
        "/team/member_add",
        json!({"team_id": "t-a", "member": {"user_id": "cy", "role": "owner"}}),
    )
    .await;
    assert_eq!(bad.status, 400, "{}", bad.text());
    assert!(bad.text().contains("role"), "{}", bad.text());
    let nobody = admin(&gw, "GET", "/user/info?user_id=cy", Value::Null).await;
    assert_eq!(nobody.status, 404, "a refused member is not made");
    let no_team = admin(
        &gw,
        "POST",
        "/team/member_add",
        json!({"team_id": "nope", "member": {"user_id": "cy"}}),
    )
    .await;
    assert_eq!(no_team.status, 404);
    let t = ok(
        &gw,
        "/team/member_delete",
        json!({"team_id": "t-a", "user_id": "bo"}),
    )
    .await;
    assert_eq!(roles(&t), [("ana".into(), "admin".into())]);
    let bo = admin(&gw, "GET", "/user/info?user_id=bo", Value::Null)
        .await
        .json();
    assert!(
        bo["user_info"]["team_id"].is_null(),
        "removed from the team he was in"
    );
    let again = admin(
        &gw,
        "POST",
        "/team/member_delete",
        json!({"team_id": "t-a", "user_id": "bo"}),
    )
    .await;
    assert_eq!(again.status, 400);
    // Audited as changes of the team.
    let audit = admin(
        &gw,
        "GET",
        "/audit?table_name=teams&object_id=t-a",
        Value::Null,
    )
    .await;
    assert!(
        audit.json()["audit_logs"].as_array().unwrap().len() >= 3,
        "{}",
        audit.text()
    );
}

#[tokio::test]
async fn a_team_admin_manages_the_teams_keys_members_and_logs_and_nothing_else() {
    let gw = gateway(&config()).await;
    for t in ["t-a", "t-b"] {
        ok(&gw, "/team/new", json!({"team_id": t})).await;
    }
    for (user, team) in [("ana", "t-a"), ("bo", "t-a"), ("cy", "t-b")] {
        ok(
            &gw,
            "/user/new",
            json!({"user_id": user, "user_role": "internal_user", "team_id": team,
                   "password": format!("{user}'s long passphrase"), "auto_create_key": false}),
        )
        .await;
    }
    ok(
        &gw,
        "/team/member_add",
        json!({"team_id": "t-a", "member": [{"user_id": "ana", "role": "admin"}, {"user_id": "bo", "role": "user"}]}),
    )
    .await;
    ok(
        &gw,
        "/team/member_add",
        json!({"team_id": "t-b", "member": {"user_id": "cy", "role": "admin"}}),
    )
    .await;
    let bo_key = ok(
        &gw,
        "/key/generate",
        json!({"key_alias": "bo-app", "user_id": "bo", "team_id": "t-a"}),
    )
    .await["key"]
        .as_str()
        .unwrap()
        .to_owned();
    let cy_key = ok(
        &gw,
        "/key/generate",
        json!({"key_alias": "cy-app", "user_id": "cy", "team_id": "t-b"}),
    )
    .await["key"]
        .as_str()
        .unwrap()
        .to_owned();
    for (key, id) in [(&bo_key, "req-bo-1"), (&cy_key, "req-cy-1")] {
        let auth = format!("Bearer {key}");
        let a = send(
            "POST",
            &gw.url("/v1/chat/completions"),
            r#"{"model":"cheap","messages":[{"role":"user","content":"hi"}]}"#,
            &[
                ("content-type", "application/json"),
                ("authorization", &auth),
                ("x-request-id", id),
            ],
        )
        .await;
        assert_eq!(a.status, 200);
    }

    let mut ana = Browser::default();
    assert_eq!(
        ana.sign_in(&gw, "ana", "ana's long passphrase")
            .await
            .status,
        303
    );
    let keys = ana.get(&gw, "/ui/keys").await.text();
    assert!(
        keys.contains("bo-app") && !keys.contains("cy-app"),
        "{keys}"
    );
    assert!(keys.contains("Your team"), "the nav links her team");
    assert!(keys.contains("For member"), "she makes keys for members");
    let csrf = csrf_of(&keys);
    let bo_hash = sluice_store::KeyHash::of(&bo_key).as_str().to_owned();
    let cy_hash = sluice_store::KeyHash::of(&cy_key).as_str().to_owned();
    // Her team's key: blocked. Another team's: not found, unchanged.
    assert_eq!(
        ana.post(
            &gw,
            "/ui/keys/block",
            &[("csrf", &csrf), ("key", &bo_hash), ("confirmed", "yes")]
        )
        .await
        .status,
        303
    );
    assert_eq!(
        ana.post(
            &gw,
            "/ui/keys/block",
            &[("csrf", &csrf), ("key", &cy_hash), ("confirmed", "yes")]
        )
        .await
        .status,
        404
    );
    let info = |k: String| {
        let gw = &gw;
        async move {
            admin(gw, "GET", &format!("/key/info?key={k}"), Value::Null)
                .await
                .json()
        }
    };
    assert_eq!(info(bo_hash.clone()).await["info"]["blocked"], true);
    assert_eq!(info(cy_hash.clone()).await["info"]["blocked"], false);
    // Keys for a member of her team, not for anyone else.
    let made = ana
        .post(
            &gw,
            "/ui/keys/new",
            &[("csrf", &csrf), ("key_alias", "for-bo"), ("user_id", "bo")],
        )
        .await;
    assert_eq!(made.status, 303, "{}", made.text());
    let list = admin(
        &gw,
        "GET",
        "/key/list?team_id=t-a&return_full_object=true",
        Value::Null,
    )
    .await
    .json();
    let for_bo = list["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["key_alias"] == "for-bo")
        .unwrap()
        .clone();
    assert_eq!(for_bo["user_id"], "bo");
    assert_eq!(for_bo["team_id"], "t-a");
    let refused = ana
        .post(
            &gw,
            "/ui/keys/new",
            &[("csrf", &csrf), ("key_alias", "for-cy"), ("user_id", "cy")],
        )
        .await;
    assert_eq!(refused.status, 400, "{}", refused.text());

    // Her team's page: members she manages; another team's: refused (403).
    let page = ana.get(&gw, "/ui/teams/edit?team_id=t-a").await;
    assert_eq!(page.status, 200, "{}", page.text());
    assert!(page.text().contains("/ui/teams/members/add"));
    assert!(
        !page.text().contains("/ui/teams/update"),
        "budgets are the proxy admins'"
    );
    assert_eq!(ana.get(&gw, "/ui/teams/edit?team_id=t-b").await.status, 403);
    let added = ana
        .post(
            &gw,
            "/ui/teams/members/add",
            &[
                ("csrf", &csrf),
                ("team_id", "t-a"),
                ("user_id", "dan"),
                ("role", "user"),
            ],
        )
        .await;
    assert_eq!(added.status, 303, "{}", added.text());
    let t = admin(&gw, "GET", "/team/info?team_id=t-a", Value::Null)
        .await
        .json();
    assert!(roles(&t["team_info"]).contains(&("dan".into(), "user".into())));
    let elsewhere = ana
        .post(
            &gw,
            "/ui/teams/members/add",
            &[("csrf", &csrf), ("team_id", "t-b"), ("user_id", "eve")],
        )
        .await;
    assert_eq!(elsewhere.status, 404);
    assert_eq!(
        admin(&gw, "GET", "/user/info?user_id=eve", Value::Null)
            .await
            .status,
        404
    );
    let removed = ana
        .post(
            &gw,
            "/ui/teams/members/remove",
            &[
                ("csrf", &csrf),
                ("team_id", "t-a"),
                ("user_id", "dan"),
                ("confirmed", "yes"),
            ],
        )
        .await;
    assert_eq!(removed.status, 303);

    // Her team's requests in the logs, not another team's.
    let seen = eventually(PATIENCE, || {
        let gw = &gw;
        let cookie = ana.cookie_header();
        async move {
            let page = send("GET", &gw.url("/ui/logs"), "", &[("cookie", &cookie)])
                .await
                .text();
            page.contains("req-bo-1")
        }
    })
    .await;
    assert!(seen, "the team admin sees her team's requests");
    let logs = ana.get(&gw, "/ui/logs?team=t-b").await.text();
    assert!(
        !logs.contains("req-cy-1"),
        "not another team's, whatever the filter says"
    );

    // A plain member sees only his own, and no team page.
    let mut bo = Browser::default();
    assert_eq!(
        bo.sign_in(&gw, "bo", "bo's long passphrase").await.status,
        303
    );
    assert_eq!(bo.get(&gw, "/ui/teams/edit?team_id=t-a").await.status, 403);
    assert!(!bo.get(&gw, "/ui/keys").await.text().contains("Your team"));

    // Demoted: her next page shows only her own keys.
    ok(
        &gw,
        "/team/member_update",
        json!({"team_id": "t-a", "user_id": "ana", "role": "user"}),
    )
    .await;
    let keys = ana.get(&gw, "/ui/keys").await.text();
    assert!(!keys.contains("bo-app"), "{keys}");
    assert_eq!(ana.get(&gw, "/ui/teams/edit?team_id=t-a").await.status, 403);
}

/// A key's page: a proxy admin changes any key's alias, models, budget, limits and expiry; a
/// team admin their team's keys; a plain member none (not even their own limits).
#[tokio::test]
async fn keys_are_edited_on_their_page_by_those_who_manage_them() {
    let gw = gateway(&config()).await;
    for t in ["t-a", "t-b"] {
        ok(&gw, "/team/new", json!({"team_id": t})).await;
    }
    for (user, team) in [("ana", "t-a"), ("bo", "t-a")] {
        ok(
            &gw,
            "/user/new",
            json!({"user_id": user, "user_role": "internal_user", "team_id": team,
                   "password": format!("{user}'s long passphrase"), "auto_create_key": false}),
        )
        .await;
    }
    ok(
        &gw,
        "/team/member_add",
        json!({"team_id": "t-a", "member": {"user_id": "ana", "role": "admin"}}),
    )
    .await;
    let key = |alias: &str, user: &str, team: &str| json!({"key_alias": alias, "user_id": user, "team_id": team, "rpm_limit": 5, "models": ["cheap"]});
    let bo_key = ok(&gw, "/key/generate", key("bo-app", "bo", "t-a")).await["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let other = ok(&gw, "/key/generate", key("other-app", "zed", "t-b")).await["token"]
        .as_str()
        .unwrap()
        .to_owned();
    let info = |hash: String| {
        let gw = &gw;
        async move {
            admin(gw, "GET", &format!("/key/info?key={hash}"), Value::Null)
                .await
                .json()["info"]
                .clone()
        }
    };

    let mut root = Browser::default();
    assert_eq!(root.sign_in(&gw, "", MASTER).await.status, 303);
    let list = root.get(&gw, "/ui/keys").await.text();
    assert!(
        list.contains(&format!("/ui/keys/edit?key={other}")),
        "{list}"
    );
    let page = root.get(&gw, &format!("/ui/keys/edit?key={other}")).await;
    assert_eq!(page.status, 200, "{}", page.text());
    let csrf = csrf_of(&page.text());
    let saved = root
        .post(
            &gw,
            "/ui/keys/update",
            &[
                ("csrf", &csrf),
                ("key", &other),
                ("key_alias", "renamed <i>"),
                ("team_id", "t-b"),
                ("user_id", ""),
                ("models", ""),
                ("max_budget", "2.5"),
                ("budget_duration", "30d"),
                ("rpm_limit", ""),
                ("tpm_limit", "1000"),
                ("duration", "7d"),
            ],
        )
        .await;
    assert_eq!(saved.status, 303, "{}", saved.text());
    let k = info(other.clone()).await;
    assert_eq!(k["key_alias"], "renamed <i>");
    assert!(k["user_id"].is_null());
    assert_eq!(k["models"], json!([]));
    assert_eq!(k["max_budget"], 2.5);
    assert_eq!(k["budget_duration"], "30d");
    assert!(k["rpm_limit"].is_null(), "blank is no limit");
    assert_eq!(k["tpm_limit"], 1000);
    assert!(k["expires"].is_string());
    let bad = root
        .post(
            &gw,
            "/ui/keys/update",
            &[("csrf", &csrf), ("key", &other), ("rpm_limit", "fast")],
        )
        .await;
    assert_eq!(bad.status, 400);
    assert!(root
        .get(&gw, "/ui/keys")
        .await
        .text()
        .contains("renamed &lt;i&gt;"));

    // The team admin: her team's key, without moving it to another team.
    let mut ana = Browser::default();
    assert_eq!(
        ana.sign_in(&gw, "ana", "ana's long passphrase")
            .await
            .status,
        303
    );
    let page = ana.get(&gw, &format!("/ui/keys/edit?key={bo_key}")).await;
    assert_eq!(page.status, 200, "{}", page.text());
    assert!(!page.text().contains(r#"name="team_id""#));
    let csrf = csrf_of(&page.text());
    let saved = ana
        .post(
            &gw,
            "/ui/keys/update",
            &[
                ("csrf", &csrf),
                ("key", &bo_key),
                ("key_alias", "bo-app"),
                ("models", "cheap"),
                ("rpm_limit", "50"),
                ("team_id", "t-b"),
            ],
        )
        .await;
    assert_eq!(saved.status, 303, "{}", saved.text());
    let k = info(bo_key.clone()).await;
    assert_eq!(k["rpm_limit"], 50);
    assert_eq!(
        k["team_id"], "t-a",
        "a team admin cannot move a key out of her team"
    );
    assert_eq!(
        ana.get(&gw, &format!("/ui/keys/edit?key={other}"))
            .await
            .status,
        404
    );
    let theirs = ana
        .post(
            &gw,
            "/ui/keys/update",
            &[("csrf", &csrf), ("key", &other), ("rpm_limit", "1")],
        )
        .await;
    assert_eq!(theirs.status, 404);

    // A plain member may not lift his own key's limits.
    let mut bo = Browser::default();
    assert_eq!(
        bo.sign_in(&gw, "bo", "bo's long passphrase").await.status,
        303
    );
    let list = bo.get(&gw, "/ui/keys").await.text();
    assert!(!list.contains("/ui/keys/edit"), "{list}");
    let csrf = csrf_of(&list);
    let lifted = bo
        .post(
            &gw,
            "/ui/keys/update",
            &[("csrf", &csrf), ("key", &bo_key), ("rpm_limit", "")],
        )
        .await;
    assert_eq!(lifted.status, 404);
    assert_eq!(info(bo_key).await["rpm_limit"], 50);
}
