//! The admin console at `/ui`, end to end against the in-process gateway with its SQLite store:
//! sign-in, session cookie attributes, CSRF refusals, keys made and changed from forms and seen
//! through the management API, escaping, the Content-Security-Policy, and `disable_admin_ui`.
use crate::common::*;
use serde_json::{json, Value};

const MASTER: &str = "sk-master-console";

fn config(extra: &str) -> String {
    format!(
        r#"
model_list:
  - model_name: cheap
    litellm_params:
      model: mock/cheap
      input_cost_per_token: 0.000001
      output_cost_per_token: 0.000002
general_settings:
  master_key: {MASTER}
  proxy_batch_write_at: 0.2
{extra}"#
    )
}

async fn admin(gw: &Gateway, method: &str, path: &str, body: Value) -> Answer {
    admin_as(gw, MASTER, method, path, body).await
}

#[tokio::test]
async fn sign_in_with_the_master_key_sets_a_strict_session_cookie() {
    let gw = gateway(&config("")).await;
    let mut b = Browser::default();
    // Not signed in: every page sends the browser to the sign-in form.
    let before = b.get(&gw, "/ui/keys").await;
    assert_eq!(before.status, 303);
    assert_eq!(before.header("location"), Some("/ui/login"));

    let wrong = b.sign_in(&gw, "admin", "sk-not-it").await;
    assert_eq!(wrong.status, 401);
    assert!(wrong.text().contains("Wrong user or password"));
    assert!(!b.cookies.iter().any(|(k, _)| k == "sluice_session"));

    let ok = b.sign_in(&gw, "", MASTER).await;
    assert_eq!(ok.status, 303, "{}", ok.text());
    let cookie = ok
        .headers
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .find(|c| c.starts_with("sluice_session="))
        .expect("a session cookie");
    for attr in ["HttpOnly", "SameSite=Strict", "Path=/ui"] {
        assert!(cookie.contains(attr), "{cookie} lacks {attr}");
    }
    assert!(!cookie.contains("Secure"), "plain HTTP: {cookie}");
    assert!(
        !cookie.contains(MASTER),
        "the master key is not in the cookie"
    );

    let page = b.get(&gw, "/ui/").await;
    assert_eq!(page.status, 200, "{}", page.text());
    assert!(page.text().contains("proxy_admin"));

    // Behind a TLS-terminating proxy the cookie is Secure.
    let mut tls = Browser::default();
    let form = tls.get(&gw, "/ui/login").await;
    let csrf = csrf_of(&form.text());
    let cookie = tls.cookie_header();
    let mut body = form_urlencoded::Serializer::new(String::new());
    body.append_pair("csrf", &csrf)
        .append_pair("password", MASTER);
    let a = send(
        "POST",
        &gw.url("/ui/login"),
        body.finish(),
        &[
            ("cookie", &cookie),
            ("x-forwarded-proto", "https"),
            ("content-type", "application/x-www-form-urlencoded"),
        ],
    )
    .await;
    assert_eq!(a.status, 303);
    assert!(a.headers.get_all("set-cookie").iter().any(|c| c
        .to_str()
        .unwrap()
        .starts_with("sluice_session=")
        && c.to_str().unwrap().contains("; Secure")));

    // Signing out ends the session: the browser forgets the cookie, and the server refuses it
    // if it is sent again (a copy an attacker kept), while another sign-in goes on working.
    let mut other = Browser::default();
    assert_eq!(other.sign_in(&gw, "", MASTER).await.status, 303);
    let page = b.get(&gw, "/ui/keys").await;
    let kept = b.cookie_header();
    let out = b
        .post(&gw, "/ui/logout", &[("csrf", &csrf_of(&page.text()))])
        .await;
    assert_eq!(out.status, 303);
    assert_eq!(b.get(&gw, "/ui/keys").await.status, 303);
    let replayed = send("GET", &gw.url("/ui/keys"), "", &[("cookie", &kept)]).await;
    assert_eq!(
        replayed.status, 303,
        "the old cookie is refused after sign-out"
    );
    assert_eq!(replayed.header("location"), Some("/ui/login"));
    assert_eq!(other.get(&gw, "/ui/keys").await.status, 200);
}

#[tokio::test]
async fn a_forged_session_or_a_login_without_its_form_is_refused() {
    let gw = gateway(&config("")).await;
    let forged = send(
        "GET",
        &gw.url("/ui/keys"),
        "",
        &[(
            "cookie",
            "sluice_session=YWRtaW4KcHJveHlfYWRtaW4KOTk5OTk5OTk5OTk.AAAA",
        )],
    )
    .await;
    assert_eq!(forged.status, 303);
    // A login post that did not come from the form (no nonce cookie, no token): 403.
    let a = send(
        "POST",
        &gw.url("/ui/login"),
        format!("password={MASTER}"),
        &[("content-type", "application/x-www-form-urlencoded")],
    )
    .await;
    assert_eq!(a.status, 403);
    assert!(!a
        .headers
        .get_all("set-cookie")
        .iter()
        .any(|c| c.to_str().unwrap().starts_with("sluice_session=")));
}

#[tokio::test]
async fn state_changes_need_the_sessions_csrf_token() {
    let gw = gateway(&config("")).await;
    let mut b = Browser::default();
    assert_eq!(b.sign_in(&gw, "admin", MASTER).await.status, 303);
    let none = b
        .post(&gw, "/ui/keys/new", &[("key_alias", "no-token")])
        .await;
    assert_eq!(none.status, 403, "{}", none.text());
    let wrong = b
        .post(
            &gw,
            "/ui/keys/new",
            &[
                ("csrf", "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"),
                ("key_alias", "bad-token"),
            ],
        )
        .await;
    assert_eq!(wrong.status, 403);
    // Another session's token does not do either.
    let mut other = Browser::default();
    other.sign_in(&gw, "admin", MASTER).await;
    let page = other.get(&gw, "/ui/keys").await;
    let others = csrf_of(&page.text());
    // Same user, same second: the two sessions' tokens may coincide; make the first session
    // older by signing it in again later only if they differ.
    let mine = csrf_of(&b.get(&gw, "/ui/keys").await.text());
    if others != mine {
        let cross = b
            .post(
                &gw,
                "/ui/keys/new",
                &[("csrf", &others), ("key_alias", "cross")],
            )
            .await;
        assert_eq!(cross.status, 403);
    }
    for alias in ["no-token", "bad-token", "cross"] {
        let found = admin(
            &gw,
            "GET",
            &format!("/key/list?key_alias={alias}"),
            Value::Null,
        )
        .await;
        assert_eq!(found.json()["total_count"], 0, "{alias} was made");
    }
}

#[tokio::test]
async fn a_key_made_in_the_console_exists_and_is_managed_through_the_api() {
    let gw = gateway(&config("")).await;
    let made = admin(&gw, "POST", "/team/new", json!({"team_id": "research"})).await;
    assert_eq!(made.status, 200, "{}", made.text());
    let mut b = Browser::default();
    b.sign_in(&gw, "admin", MASTER).await;
    let page = b.get(&gw, "/ui/keys").await;
    let csrf = csrf_of(&page.text());
    let alias = r#"<script>alert("x")</script>"#;
    let created = b
        .post(
            &gw,
            "/ui/keys/new",
            &[
                ("csrf", &csrf),
                ("key_alias", alias),
                ("team_id", "research"),
                ("models", "cheap, other"),
                ("max_budget", "2.5"),
                ("rpm_limit", "7"),
            ],
        )
        .await;
    // Made, then off to the page that shows it (post/redirect/get: a reload makes no other).
    assert_eq!(created.status, 303, "{}", created.text());
    assert_eq!(created.header("location"), Some("/ui/keys/created"));
    let shown = b.get(&gw, "/ui/keys/created").await;
    assert_eq!(shown.status, 200, "{}", shown.text());
    let html = shown.text();
    let at = html.find(r#"id="new-key">"#).expect("the new key shown") + r#"id="new-key">"#.len();
    let key = html[at..at + html[at..].find('<').unwrap()].to_owned();
    assert!(key.starts_with("sk-"), "{key}");
    // It travelled sealed, never in a URL, and is shown once: not again on reload.
    assert!(created
        .headers
        .get_all("set-cookie")
        .iter()
        .all(|c| !c.to_str().unwrap().contains(&key)));
    let again = b.get(&gw, "/ui/keys/created").await.text();
    assert!(
        !again.contains(&key) && again.contains(r#"id="shown""#),
        "{again}"
    );

    let info = admin(&gw, "GET", &format!("/key/info?key={key}"), Value::Null).await;
    assert_eq!(info.status, 200, "{}", info.text());
    let info = &info.json()["info"];
    assert_eq!(info["key_alias"], alias);
    assert_eq!(info["team_id"], "research");
    assert_eq!(info["models"], json!(["cheap", "other"]));
    assert_eq!(info["max_budget"], 2.5);
    assert_eq!(info["rpm_limit"], 7);

    // The alias comes back escaped, never as markup.
    let list = b.get(&gw, "/ui/keys").await;
    let text = list.text();
    assert!(!text.contains("<script>"), "unescaped alias in the page");
    assert!(text.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;"));

    // The key works, then is blocked from the console and refused, then deleted.
    let chat = |k: String| {
        let url = gw.url("/v1/chat/completions");
        async move {
            let auth = format!("Bearer {k}");
            send(
                "POST",
                &url,
                r#"{"model":"cheap","messages":[{"role":"user","content":"hi"}]}"#,
                &[
                    ("content-type", "application/json"),
                    ("authorization", &auth),
                ],
            )
            .await
        }
    };
    assert_eq!(chat(key.clone()).await.status, 200);
    let token = info["token"].as_str().unwrap().to_owned();
    // A destructive action's first post only asks, on a page of its own that carries the
    // form again; nothing changes until the answer comes back with `confirmed=yes`.
    let asked = b
        .post(&gw, "/ui/keys/block", &[("csrf", &csrf), ("key", &token)])
        .await;
    assert_eq!(asked.status, 200, "{}", asked.text());
    assert!(asked.text().contains("Block this key?"), "{}", asked.text());
    assert!(asked.text().contains(r#"name="confirmed" value="yes""#));
    assert!(asked.text().contains(r#"href="/ui/keys""#), "a way back");
    assert_eq!(chat(key.clone()).await.status, 200, "not blocked yet");
    let blocked = b
        .post(
            &gw,
            "/ui/keys/block",
            &[
                ("csrf", &csrf_of(&asked.text())),
                ("key", &token),
                ("confirmed", "yes"),
            ],
        )
        .await;
    assert_eq!(blocked.status, 303, "{}", blocked.text());
    let info = admin(&gw, "GET", &format!("/key/info?key={key}"), Value::Null).await;
    assert_eq!(info.json()["info"]["blocked"], true);
    assert_eq!(chat(key.clone()).await.status, 401);

    let deleted = b
        .post(
            &gw,
            "/ui/keys/delete",
            &[("csrf", &csrf), ("key", &token), ("confirmed", "yes")],
        )
        .await;
    assert_eq!(deleted.status, 303);
    let gone = admin(&gw, "GET", &format!("/key/info?key={key}"), Value::Null).await;
    assert_eq!(gone.status, 404);
}

#[tokio::test]
async fn every_page_renders_with_a_strict_policy_and_live_figures() {
    let gw = gateway(&config("")).await;
    // One request through the gateway, so the counters and the spend log have something.
    let auth = format!("Bearer {MASTER}");
    let a = send(
        "POST",
        &gw.url("/v1/chat/completions"),
        r#"{"model":"cheap","messages":[{"role":"user","content":"hi"}]}"#,
        &[
            ("content-type", "application/json"),
            ("authorization", &auth),
            ("x-litellm-tags", "console-tag"),
        ],
    )
    .await;
    assert_eq!(a.status, 200);
    let request_id = a.header("x-request-id").unwrap().to_owned();
    let mut b = Browser::default();
    let login = b.get(&gw, "/ui/login").await;
    let csp = login.header("content-security-policy").unwrap().to_owned();
    assert!(
        csp.contains("default-src 'self'") && csp.contains("script-src 'none'"),
        "{csp}"
    );
    b.sign_in(&gw, "admin", MASTER).await;
    for path in [
        "/ui",
        "/ui/",
        "/ui/keys",
        "/ui/models",
        "/ui/spend",
        "/ui/logs",
        "/ui/teams",
        "/ui/users",
        "/ui/customers",
        "/ui/audit",
        "/ui/config",
        "/ui/playground",
    ] {
        let p = b.get(&gw, path).await;
        assert_eq!(p.status, 200, "{path}: {}", p.text());
        assert_eq!(
            p.header("content-security-policy"),
            Some(csp.as_str()),
            "{path}"
        );
        assert_eq!(p.header("x-frame-options"), Some("DENY"));
        assert!(p.header("content-type").unwrap().starts_with("text/html"));
        assert!(!p.text().contains("<script"), "{path} has a script");
    }
    let css = b.get(&gw, "/ui/style.css").await;
    assert_eq!(css.status, 200);
    assert!(css.header("content-type").unwrap().starts_with("text/css"));

    // The overview's model request count is the /metrics counter's (requests that named a
    // model group), read after the gateway's recorder has counted the chat request.
    let (metrics, cookie) = (gw.url("/metrics"), b.cookie_header());
    let same = eventually(PATIENCE, || async {
        let metrics = send("GET", &metrics, "", &[]).await.text();
        let counted: f64 = metrics
            .lines()
            .filter(|l| l.starts_with("sluice_requests_total{") && !l.contains(r#"model="""#))
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<f64>().unwrap())
            .sum();
        let overview = send("GET", &gw.url("/ui/"), "", &[("cookie", &cookie)])
            .await
            .text();
        counted >= 1.0 && overview.contains(&format!(r#"id="requests">{counted}<"#))
    })
    .await;
    assert!(same, "the overview's count is not /metrics' count");

    // Models: the deployment and its live state.
    let models = b.get(&gw, "/ui/models").await.text();
    assert!(models.contains("cheap") && models.contains("healthy"));

    // The request shows in the logs once the spend writer's batch lands, found by its id.
    let logs = b
        .get_until(&gw, &format!("/ui/logs?request_id={request_id}"), |a| {
            let logs = a.text();
            listed(&logs) == [request_id.as_str()] && logs.contains(r#"class="state-success""#)
        })
        .await
        .text();
    assert!(
        listed(&logs) == [request_id.as_str()] && logs.contains(r#"class="state-success""#),
        "request {request_id} not in the console's logs"
    );
    let failed = b.get(&gw, "/ui/logs?failed=1").await.text();
    assert!(!failed.contains(&request_id), "a success listed as failed");
    let spend = b.get(&gw, "/ui/spend?days=1").await.text();
    assert!(spend.contains("cheap"), "{spend}");
    // Spend by tag, for an admin: the request's tag.
    let tags = spend.split(r#"id="tags""#).nth(1).unwrap_or_default();
    assert!(tags.contains("<td>console-tag</td>"), "{spend}");
    // And the tag's series in /metrics.
    let metrics = send("GET", &gw.url("/metrics"), "", &[]).await.text();
    assert!(
        metrics.contains(r#"sluice_tag_requests_total{tag="console-tag"} 1"#),
        "{metrics}"
    );
}

#[tokio::test]
async fn disable_admin_ui_removes_the_console() {
    let gw = gateway(&config("  disable_admin_ui: true\n")).await;
    for path in ["/ui", "/ui/login", "/ui/style.css", "/ui/keys"] {
        assert_eq!(
            send("GET", &gw.url(path), "", &[]).await.status,
            404,
            "{path}"
        );
    }
    // The management API is untouched.
    assert_eq!(
        admin(&gw, "GET", "/key/list", Value::Null).await.status,
        200
    );
}

#[tokio::test]
async fn users_sign_in_with_passwords_and_see_only_their_own_on_sqlite() {
    users_and_roles(&gateway(&config("")).await).await;
}

#[tokio::test]
async fn users_sign_in_with_passwords_and_see_only_their_own_on_postgres() {
    let Some(server) = postgres_server("SLUICE_TEST_POSTGRES_URL") else {
        return;
    };
    let db = postgres_database(&server).await;
    users_and_roles(&gateway(&config(&format!("  database_url: {db}\n"))).await).await;
}

/// A session made on one instance works on another with the same master key (nothing is kept
/// server-side), and not on one with another master key.
#[tokio::test]
async fn a_session_works_on_every_instance_with_the_same_master_key() {
    let one = gateway(&config("")).await;
    let two = gateway(&config("")).await;
    let other = gateway(&config("").replace(MASTER, "sk-another-master")).await;
    let mut b = Browser::default();
    assert_eq!(b.sign_in(&one, "admin", MASTER).await.status, 303);
    let on_two = b.get(&two, "/ui/models").await;
    assert_eq!(on_two.status, 200, "{}", on_two.text());
    // Its CSRF token holds there too.
    let csrf = csrf_of(&on_two.text());
    let made = b
        .post(
            &two,
            "/ui/keys/new",
            &[("csrf", &csrf), ("key_alias", "made-on-two")],
        )
        .await;
    assert_eq!(made.status, 303, "{}", made.text());
    // The key made on one instance is shown by the other: it travels with the redirect.
    assert!(b
        .get(&one, "/ui/keys/created")
        .await
        .text()
        .contains(r#"id="new-key""#));
    // Another master key: signed out (and the stale cookie removed).
    assert_eq!(b.get(&other, "/ui/models").await.status, 303);
    assert!(b.cookies.iter().all(|(k, _)| k != "sluice_session"));
}

async fn users_and_roles(gw: &Gateway) {
    assert_eq!(
        admin(gw, "POST", "/team/new", json!({"team_id": "search"}))
            .await
            .status,
        200
    );
    let made = admin(
        gw,
        "POST",
        "/user/new",
        json!({"user_id": "ana", "user_role": "internal_user", "team_id": "search",
               "password": "ana's long passphrase", "auto_create_key": false}),
    )
    .await;
    assert_eq!(made.status, 200, "{}", made.text());
    assert!(!made.text().contains("passphrase") && !made.text().contains("argon2"));
    let short = admin(
        gw,
        "POST",
        "/user/new",
        json!({"user_id": "bo", "password": "short"}),
    )
    .await;
    assert_eq!(short.status, 400, "{}", short.text());
    admin(
        gw,
        "POST",
        "/user/new",
        json!({"user_id": "vic", "user_role": "internal_user_viewer", "password": "vic's long passphrase", "auto_create_key": false}),
    )
    .await;
    // Someone else's key, and ana's own made by the admin.
    let other = admin(
        gw,
        "POST",
        "/key/generate",
        json!({"key_alias": "not-anas", "user_id": "zed"}),
    )
    .await;
    let other_token = other.json()["token"].as_str().unwrap().to_owned();
    admin(
        gw,
        "POST",
        "/key/generate",
        json!({"key_alias": "anas-first", "user_id": "ana"}),
    )
    .await;
    let info = admin(gw, "GET", "/user/info?user_id=ana", Value::Null).await;
    assert!(!info.text().contains("password"), "{}", info.text());

    let mut b = Browser::default();
    assert_eq!(b.sign_in(gw, "ana", "wrong passphrase").await.status, 401);
    assert_eq!(
        b.sign_in(gw, "nobody", "ana's long passphrase")
            .await
            .status,
        401
    );
    let ok = b.sign_in(gw, "ana", "ana's long passphrase").await;
    assert_eq!(ok.status, 303, "{}", ok.text());
    let keys = b.get(gw, "/ui/keys").await.text();
    assert!(
        keys.contains("anas-first") && !keys.contains("not-anas"),
        "{keys}"
    );
    assert!(keys.contains("internal_user"));
    // Teams and users are for admins, and the page says so.
    let teams = b.get(gw, "/ui/teams").await;
    assert_eq!(teams.status, 403);
    assert!(
        teams.text().contains("for proxy admins"),
        "{}",
        teams.text()
    );
    assert_eq!(b.get(gw, "/ui/users").await.status, 403);
    assert_eq!(b.get(gw, "/ui/no-such-page").await.status, 404);

    // A key ana makes is hers and her team's, whatever the form says.
    let csrf = csrf_of(&keys);
    let created = b
        .post(
            gw,
            "/ui/keys/new",
            &[
                ("csrf", &csrf),
                ("key_alias", "anas-second"),
                ("user_id", "zed"),
                ("team_id", "other"),
            ],
        )
        .await;
    assert_eq!(created.status, 303, "{}", created.text());
    let listed = admin(
        gw,
        "GET",
        "/key/list?key_alias=anas-second&return_full_object=true",
        Value::Null,
    )
    .await;
    let k = &listed.json()["keys"][0];
    assert_eq!(k["user_id"], "ana");
    assert_eq!(k["team_id"], "search");

    // Someone else's key cannot be blocked or deleted by her.
    for action in ["block", "delete"] {
        let a = b
            .post(
                gw,
                &format!("/ui/keys/{action}"),
                &[("csrf", &csrf), ("key", &other_token), ("confirmed", "yes")],
            )
            .await;
        assert_eq!(a.status, 404, "{action}: {}", a.text());
    }
    let still = admin(
        gw,
        "GET",
        &format!("/key/info?key={other_token}"),
        Value::Null,
    )
    .await;
    assert_eq!(still.json()["info"]["blocked"], false);

    // A viewer looks but cannot change.
    let mut v = Browser::default();
    assert_eq!(
        v.sign_in(gw, "vic", "vic's long passphrase").await.status,
        303
    );
    let page = v.get(gw, "/ui/keys").await;
    assert_eq!(page.status, 200);
    assert!(!page.text().contains("/ui/keys/new"));
    let refused = v
        .post(
            gw,
            "/ui/keys/new",
            &[("csrf", &csrf_of(&page.text())), ("key_alias", "vics")],
        )
        .await;
    assert_eq!(refused.status, 403);

    // A changed role ends the sessions signed in with the old one.
    assert_eq!(v.get(gw, "/ui/keys").await.status, 200);
    admin(
        gw,
        "POST",
        "/user/update",
        json!({"user_id": "vic", "user_role": "proxy_admin_viewer"}),
    )
    .await;
    assert_eq!(v.get(gw, "/ui/keys").await.status, 303);

    // A new password ends the sessions made with the old one; removing it ends password
    // sign-in.
    assert_eq!(b.get(gw, "/ui/keys").await.status, 200);
    admin(
        gw,
        "POST",
        "/user/update",
        json!({"user_id": "ana", "password": "ana's newer passphrase"}),
    )
    .await;
    assert_eq!(b.get(gw, "/ui/keys").await.status, 303);
    assert_eq!(
        b.sign_in(gw, "ana", "ana's newer passphrase").await.status,
        303
    );
    assert_eq!(b.get(gw, "/ui/keys").await.status, 200);
    admin(
        gw,
        "POST",
        "/user/update",
        json!({"user_id": "ana", "password": null}),
    )
    .await;
    assert_eq!(b.get(gw, "/ui/keys").await.status, 303);
    let mut again = Browser::default();
    assert_eq!(
        again
            .sign_in(gw, "ana", "ana's newer passphrase")
            .await
            .status,
        401
    );
}

#[tokio::test]
async fn the_playground_sends_a_chat_request_through_the_gateway() {
    let gw = gateway(&config("")).await;
    let key = admin(
        &gw,
        "POST",
        "/key/generate",
        json!({"key_alias": "play", "models": ["cheap"]}),
    )
    .await
    .json()["key"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut b = Browser::default();
    b.sign_in(&gw, "admin", MASTER).await;
    let page = b.get(&gw, "/ui/playground").await;
    assert_eq!(page.status, 200);
    assert!(page.text().contains(r#"<option value="cheap""#));
    let csrf = csrf_of(&page.text());
    let sent = b
        .post(
            &gw,
            "/ui/playground",
            &[
                ("csrf", &csrf),
                ("key", &key),
                ("model", "cheap"),
                ("prompt", "hello <there>"),
            ],
        )
        .await;
    assert_eq!(sent.status, 200, "{}", sent.text());
    let html = sent.text();
    assert!(
        html.contains(r#"<div class="turn user"><div class="who-said">user</div><pre>hello &lt;there&gt;</pre>"#),
        "the prompt is a turn of the conversation, escaped: {html}"
    );
    assert!(
        !html.contains(&key),
        "the key is never written back: {html}"
    );
    assert!(
        html.contains(" tokens in, ") && html.contains("cost $"),
        "{html}"
    );
    // The newest answer's text: the last assistant turn's `<pre>`.
    let answer_of = |html: &str| {
        let turn = html.rfind(r#"class="turn assistant""#).unwrap();
        let pre = turn + html[turn..].find("<pre").unwrap();
        let at = pre + html[pre..].find('>').unwrap() + 1;
        html[at..at + html[at..].find("</pre>").unwrap()].to_owned()
    };
    let whole = answer_of(&html);
    assert!(!whole.is_empty());
    // Streamed: the same answer written into the page as it comes, then the usage and the rest.
    let streamed = b
        .post(
            &gw,
            "/ui/playground",
            &[
                ("csrf", &csrf),
                ("model", "cheap"),
                ("prompt", "hello <there>"),
                ("stream", "1"),
            ],
        )
        .await;
    assert_eq!(streamed.status, 200, "{}", streamed.text());
    assert!(streamed
        .header("content-security-policy")
        .is_some_and(|c| c.contains("script-src 'none'")));
    let page = streamed.text();
    assert_eq!(answer_of(&page), whole, "{page}");
    assert!(page.contains(" tokens in, "), "{page}");
    assert!(
        page.contains(r#"id="remembered""#) && !page.contains(&key),
        "the key typed before serves this turn, and is not shown: {page}"
    );
    assert!(page.trim_end().ends_with("</html>"), "{page}");
    // Charged to the key like any request: its spend moves once the batch lands.
    let info = format!("/key/info?key={key}");
    let spent = poll(
        PATIENCE,
        || async {
            let info = admin(&gw, "GET", &info, Value::Null).await;
            info.json()["info"]["spend"].as_f64().unwrap()
        },
        |spent| *spent > 0.0,
    )
    .await;
    assert!(
        spent > 0.0,
        "the playground's request was not charged to its key"
    );
    // A wrong key is the gateway's own refusal, shown on the page.
    let refused = b
        .post(
            &gw,
            "/ui/playground",
            &[
                ("csrf", &csrf),
                ("key", "sk-wrong-key"),
                ("model", "cheap"),
                ("prompt", "hi"),
            ],
        )
        .await;
    assert!(refused.text().contains("401"), "{}", refused.text());

    // Or a key of the signed-in user's own, made for the sign-in: then a turn needs no key.
    let mut own = Browser::default();
    own.sign_in(&gw, "admin", MASTER).await;
    let csrf = csrf_of(&own.get(&gw, "/ui/playground").await.text());
    let made = own
        .post(
            &gw,
            "/ui/playground",
            &[("csrf", &csrf), ("own_key", "1"), ("model", "cheap")],
        )
        .await;
    assert_eq!(made.status, 200, "{}", made.text());
    assert!(
        made.text().contains(r#"id="remembered""#),
        "{}",
        made.text()
    );
    let turn = own
        .post(
            &gw,
            "/ui/playground",
            &[("csrf", &csrf), ("model", "cheap"), ("prompt", "hi")],
        )
        .await;
    assert!(turn.text().contains(" tokens in, "), "{}", turn.text());
    let listed = admin(&gw, "GET", "/key/list?return_full_object=true", Value::Null)
        .await
        .json();
    let mine = listed["keys"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| {
            k["key_alias"]
                .as_str()
                .is_some_and(|a| a.starts_with("playground: admin"))
        })
        .expect("the playground's own key")
        .clone();
    assert_eq!(mine["user_id"], "admin");
    assert!(mine["expires"].is_string(), "it expires with the sign-in");
}

#[tokio::test]
async fn admins_make_teams_and_users_who_then_sign_in() {
    let gw = gateway(&config("")).await;
    let mut b = Browser::default();
    b.sign_in(&gw, "admin", MASTER).await;
    let page = b.get(&gw, "/ui/teams").await.text();
    let csrf = csrf_of(&page);
    let team = b
        .post(
            &gw,
            "/ui/teams/new",
            &[("csrf", &csrf), ("team_id", "ops"), ("max_budget", "12")],
        )
        .await;
    assert_eq!(team.status, 303, "{}", team.text());
    let info = admin(&gw, "GET", "/team/info?team_id=ops", Value::Null).await;
    assert_eq!(info.json()["team_info"]["max_budget"], 12.0);
    let user = b
        .post(
            &gw,
            "/ui/users/new",
            &[
                ("csrf", &csrf),
                ("user_id", "kim"),
                ("user_role", "internal_user"),
                ("team_id", "ops"),
                ("password", "kim's own passphrase"),
            ],
        )
        .await;
    assert_eq!(user.status, 303, "{}", user.text());
    assert!(b.get(&gw, "/ui/users").await.text().contains("kim"));
    let mut kim = Browser::default();
    assert_eq!(
        kim.sign_in(&gw, "kim", "kim's own passphrase").await.status,
        303
    );
    // Kim is not an admin: no teams or users, and no making them.
    let kims = csrf_of(&kim.get(&gw, "/ui/keys").await.text());
    let refused = kim
        .post(
            &gw,
            "/ui/teams/new",
            &[("csrf", &kims), ("team_id", "kims")],
        )
        .await;
    assert_eq!(refused.status, 404);
    let none = admin(&gw, "GET", "/team/info?team_id=kims", Value::Null).await;
    assert_eq!(none.status, 404);
}

/// With the response cache on, the overview shows its hit rate, hits, coalesced requests and
/// what the hits saved, from the counters `/metrics` exports.
#[tokio::test]
async fn the_overview_shows_the_cache_hit_rate() {
    let gw = gateway(&config("litellm_settings:\n  cache: true\n")).await;
    let chat = r#"{"model":"cheap","messages":[{"role":"user","content":"cache card"}]}"#;
    let auth = format!("Bearer {MASTER}");
    for _ in 0..2 {
        let a = send(
            "POST",
            &gw.url("/v1/chat/completions"),
            chat,
            &[
                ("authorization", &auth),
                ("content-type", "application/json"),
            ],
        )
        .await;
        assert_eq!(a.status, 200, "{}", a.text());
    }
    let mut b = Browser::default();
    assert_eq!(b.sign_in(&gw, "", MASTER).await.status, 303);
    let page = b.get(&gw, "/ui/").await.text();
    assert!(page.contains(r#"id="cache-hit-rate">50.0 %<"#), "{page}");
    assert!(page.contains("1 hits · 0 coalesced"), "{page}");
    // The live figures, from the same exposition /metrics serves, once the recorder counted
    // both requests: no errors, latency and overhead quantiles, the tokens of the one call.
    let page = b
        .get_until(&gw, "/ui/", |a| a.text().contains(r#"id="requests">2<"#))
        .await
        .text();
    assert!(page.contains(r#"id="error-rate">0.0 %<"#), "{page}");
    for id in ["latency", "overhead"] {
        let at = page.find(&format!(r#"id="{id}">"#)).unwrap();
        assert!(page[at..at + 60].contains(" ms / "), "{id}: {page}");
    }
    let at = page.find(r#"id="tokens">"#).unwrap() + r#"id="tokens">"#.len();
    let input: u64 = page[at..].split(' ').next().unwrap().parse().unwrap();
    assert!(input > 0, "{page}");
}

/// Five wrong passwords for one name lock that name's password sign-in for a quarter hour (429
/// with Retry-After, even with the right password); other names are not held up.
#[tokio::test]
async fn wrong_passwords_lock_the_name_for_a_while() {
    let gw = gateway(&config("")).await;
    let made = admin(
        &gw,
        "POST",
        "/user/new",
        json!({"user_id": "ana", "user_role": "internal_user", "password": "a long passphrase"}),
    )
    .await;
    assert_eq!(made.status, 200, "{}", made.text());
    let mut b = Browser::default();
    for _ in 0..5 {
        assert_eq!(b.sign_in(&gw, "ana", "guess").await.status, 401);
    }
    let locked = b.sign_in(&gw, "ana", "a long passphrase").await;
    assert_eq!(locked.status, 429, "{}", locked.text());
    let wait: u64 = locked.header("retry-after").unwrap().parse().unwrap();
    assert!(wait > 800 && wait <= 900, "{wait}");
    assert!(locked.text().contains("Too many wrong passwords"));
    // The admin's name is another: the master key still signs in.
    assert_eq!(b.sign_in(&gw, "admin", MASTER).await.status, 303);
}

/// One sign-in through the form from `from` (`X-Forwarded-For`, believed from one trusted
/// hop): its status.
async fn sign_in_from(gw: &Gateway, from: &str, user: &str, password: &str) -> u16 {
    let form = send(
        "GET",
        &gw.url("/ui/login"),
        "",
        &[("x-forwarded-for", from)],
    )
    .await;
    let mut b = Browser::default();
    b.keep(&form);
    let mut body = form_urlencoded::Serializer::new(String::new());
    body.append_pair("csrf", &csrf_of(&form.text()))
        .append_pair("username", user)
        .append_pair("password", password);
    let cookie = b.cookie_header();
    let a = send(
        "POST",
        &gw.url("/ui/login"),
        body.finish(),
        &[
            ("cookie", &cookie),
            ("x-forwarded-for", from),
            ("content-type", "application/x-www-form-urlencoded"),
        ],
    )
    .await;
    a.status.as_u16()
}

/// A stranger's wrong passwords lock out the stranger, not the admin signing in from
/// elsewhere.
#[tokio::test]
async fn a_strangers_wrong_passwords_do_not_lock_the_admin_out() {
    let gw = gateway(&config("  use_x_forwarded_for: true\n")).await;
    let eve = "203.0.113.9";
    // Five from the stranger's address lock that address out.
    for _ in 0..5 {
        assert_eq!(sign_in_from(&gw, eve, "admin", "sk-guess").await, 401);
    }
    assert_eq!(sign_in_from(&gw, eve, "admin", MASTER).await, 429);
    assert_eq!(
        sign_in_from(&gw, "198.51.100.4", "admin", MASTER).await,
        303
    );
}

/// An admin edits and deletes a team and a user from their pages: the management API sees the
/// changes; a viewer sees the page but gets no form.
#[tokio::test]
async fn teams_and_users_are_edited_and_deleted_from_their_pages() {
    let gw = gateway(&config("")).await;
    assert_eq!(
        admin(&gw, "POST", "/team/new", json!({"team_id": "t-edit"}))
            .await
            .status,
        200
    );
    assert_eq!(
        admin(
            &gw,
            "POST",
            "/user/new",
            json!({"user_id": "eve", "user_role": "internal_user", "password": "first passphrase"})
        )
        .await
        .status,
        200
    );
    let mut b = Browser::default();
    assert_eq!(b.sign_in(&gw, "", MASTER).await.status, 303);
    let list = b.get(&gw, "/ui/teams").await.text();
    assert!(
        list.contains(r#"href="/ui/teams/edit?team_id=t-edit""#),
        "{list}"
    );
    let page = b.get(&gw, "/ui/teams/edit?team_id=t-edit").await;
    assert_eq!(page.status, 200, "{}", page.text());
    let csrf = csrf_of(&page.text());
    let saved = b
        .post(
            &gw,
            "/ui/teams/update",
            &[
                ("csrf", &csrf),
                ("team_id", "t-edit"),
                ("team_alias", "Edited <b>"),
                ("max_budget", "12.5"),
                ("rpm_limit", "30"),
                ("tpm_limit", ""),
                ("blocked", "true"),
            ],
        )
        .await;
    assert_eq!(saved.status, 303, "{}", saved.text());
    let t = admin(&gw, "GET", "/team/info?team_id=t-edit", Value::Null)
        .await
        .json();
    let t = &t["team_info"];
    assert_eq!(t["team_alias"], "Edited <b>");
    assert_eq!(t["max_budget"], 12.5);
    assert_eq!(t["rpm_limit"], 30);
    assert_eq!(t["blocked"], true);
    let edited = b.get(&gw, "/ui/teams/edit?team_id=t-edit").await.text();
    assert!(edited.contains("Edited &lt;b&gt;"), "escaped");
    let bad = b
        .post(
            &gw,
            "/ui/teams/update",
            &[
                ("csrf", &csrf),
                ("team_id", "t-edit"),
                ("max_budget", "lots"),
            ],
        )
        .await;
    assert_eq!(bad.status, 400, "{}", bad.text());

    // The user: a new role and password, then deleted.
    let page = b.get(&gw, "/ui/users/edit?user_id=eve").await.text();
    let csrf = csrf_of(&page);
    let saved = b
        .post(
            &gw,
            "/ui/users/update",
            &[
                ("csrf", &csrf),
                ("user_id", "eve"),
                ("user_email", "eve@example.com"),
                ("user_role", "internal_user_viewer"),
                ("team_id", "t-edit"),
                ("max_budget", ""),
                ("password", "second passphrase"),
            ],
        )
        .await;
    assert_eq!(saved.status, 303, "{}", saved.text());
    let u = admin(&gw, "GET", "/user/info?user_id=eve", Value::Null)
        .await
        .json();
    assert_eq!(u["user_info"]["user_role"], "internal_user_viewer");
    assert_eq!(u["user_info"]["team_id"], "t-edit");
    let mut eve = Browser::default();
    assert_eq!(
        eve.sign_in(&gw, "eve", "first passphrase").await.status,
        401
    );
    assert_eq!(
        eve.sign_in(&gw, "eve", "second passphrase").await.status,
        303
    );
    let gone = b
        .post(
            &gw,
            "/ui/users/delete",
            &[("csrf", &csrf), ("user_id", "eve"), ("confirmed", "yes")],
        )
        .await;
    assert_eq!(gone.status, 303, "{}", gone.text());
    assert_eq!(
        admin(&gw, "GET", "/user/info?user_id=eve", Value::Null)
            .await
            .status,
        404
    );
    // Her session ended with her.
    assert_eq!(eve.get(&gw, "/ui/").await.status, 303);
    let gone = b
        .post(
            &gw,
            "/ui/teams/delete",
            &[("csrf", &csrf), ("team_id", "t-edit"), ("confirmed", "yes")],
        )
        .await;
    assert_eq!(gone.status, 303, "{}", gone.text());
    assert_eq!(
        admin(&gw, "GET", "/team/info?team_id=t-edit", Value::Null)
            .await
            .status,
        404
    );
}

/// The config page shows the running deployments with secrets masked, and reloads the file:
/// a good one is served at once, a bad one is refused with every problem by path while the
/// running config keeps serving.
#[tokio::test]
async fn the_config_page_shows_the_config_and_reloads_the_file() {
    // A second deployment with an upstream key, to see it masked.
    let yaml = config("").replacen(
        "general_settings:",
        "  - model_name: secretive\n    litellm_params:\n      model: openai/gpt-4o\n      api_base: http://127.0.0.1:9/v1\n      api_key: sk-upstream-hidden-123\ngeneral_settings:",
        1,
    );
    let gw = gateway(&yaml).await;
    let file = temp_dir().join("config.yaml");
    std::fs::write(&file, &yaml).unwrap();
    gw.state.set_config_path(file.clone());
    let mut b = Browser::default();
    assert_eq!(b.sign_in(&gw, "", MASTER).await.status, 303);
    let page = b.get(&gw, "/ui/config").await;
    assert_eq!(page.status, 200, "{}", page.text());
    let html = page.text();
    assert!(
        html.contains("secretive") && html.contains("cheap"),
        "{html}"
    );
    assert!(
        !html.contains("sk-upstream-hidden-123"),
        "the key is masked"
    );
    let csrf = csrf_of(&html);

    // A good file: served at once.
    std::fs::write(
        &file,
        yaml.replacen("model_name: cheap", "model_name: cheaper", 1),
    )
    .unwrap();
    let done = b.post(&gw, "/ui/config/reload", &[("csrf", &csrf)]).await;
    assert_eq!(done.status, 303, "{}", done.text());
    assert_eq!(done.header("location"), Some("/ui/config"));
    let after = b.get(&gw, "/ui/config").await.text();
    assert!(
        after.contains(r#"id="notice""#) && after.contains("Reloaded"),
        "{after}"
    );
    let models = send(
        "GET",
        &gw.url("/v1/models"),
        "",
        &[("authorization", &format!("Bearer {MASTER}"))],
    )
    .await
    .text();
    assert!(models.contains("\"cheaper\""), "{models}");

    // A bad file: every problem by path, and the running config keeps serving.
    std::fs::write(
        &file,
        yaml.replacen("model: mock/cheap", "model: nowhere/cheap", 1)
            .replacen("proxy_batch_write_at: 0.2", "proxy_batch_write_at: soon", 1),
    )
    .unwrap();
    let refused = b.post(&gw, "/ui/config/reload", &[("csrf", &csrf)]).await;
    assert_eq!(refused.status, 400, "{}", refused.text());
    let text = refused.text();
    assert!(
        text.contains("model_list[0].litellm_params.model"),
        "{text}"
    );
    assert!(
        text.contains("general_settings.proxy_batch_write_at"),
        "{text}"
    );
    let models = send(
        "GET",
        &gw.url("/v1/models"),
        "",
        &[("authorization", &format!("Bearer {MASTER}"))],
    )
    .await
    .text();
    assert!(models.contains("\"cheaper\""), "still served: {models}");
}

/// Every change through the management API or the console is in the audit log, with who made
/// it and the object's value before and after; no key's plaintext is ever stored.
#[tokio::test]
async fn changes_are_in_the_audit_log_with_secrets_masked() {
    let gw = gateway(&config("")).await;
    let by_bot = |path: &'static str, body: Value| {
        let url = gw.url(path);
        async move {
            send(
                "POST",
                &url,
                body.to_string(),
                &[
                    ("authorization", &format!("Bearer {MASTER}")),
                    ("content-type", "application/json"),
                    ("litellm-changed-by", "ci-bot"),
                ],
            )
            .await
        }
    };
    let made = by_bot(
        "/key/generate",
        json!({"key_alias": "audited", "max_budget": 1}),
    )
    .await
    .json();
    let (key, token) = (
        made["key"].as_str().unwrap().to_owned(),
        made["token"].as_str().unwrap().to_owned(),
    );
    by_bot("/key/update", json!({"key": key, "max_budget": 2})).await;
    assert_eq!(
        admin(&gw, "POST", "/team/new", json!({"team_id": "t-aud"}))
            .await
            .status,
        200
    );
    admin(&gw, "POST", "/team/delete", json!({"team_ids": ["t-aud"]})).await;
    // From the console, as the signed-in user.
    let mut b = Browser::default();
    assert_eq!(b.sign_in(&gw, "", MASTER).await.status, 303);
    let keys = b.get(&gw, "/ui/keys").await.text();
    let made_in_ui = b
        .post(
            &gw,
            "/ui/keys/new",
            &[("csrf", &csrf_of(&keys)), ("key_alias", "from-ui")],
        )
        .await;
    assert_eq!(made_in_ui.status, 303, "{}", made_in_ui.text());

    let log = admin(&gw, "GET", "/audit?table_name=keys", Value::Null)
        .await
        .json();
    let rows = log["audit_logs"].as_array().unwrap();
    let text = log.to_string();
    assert!(
        !text.contains(&key),
        "the plaintext key is never stored: {text}"
    );
    let of = |action: &str, by: &str| {
        rows.iter()
            .find(|r| r["action"] == action && r["changed_by"] == by)
            .unwrap_or_else(|| panic!("no {action} by {by}: {text}"))
    };
    let created = of("created", "ci-bot");
    assert_eq!(created["object_id"], token.as_str());
    assert!(created["before_value"].is_null());
    let updated = of("updated", "ci-bot");
    assert_eq!(updated["object_id"], token.as_str());
    assert_eq!(updated["before_value"]["info"]["max_budget"], 1.0);
    assert_eq!(updated["updated_values"]["max_budget"], 2.0);
    let from_ui = of("created", "admin");
    assert_eq!(from_ui["updated_values"]["key_alias"], "from-ui");
    let teams = admin(&gw, "GET", "/audit?object_id=t-aud", Value::Null)
        .await
        .json();
    let actions: Vec<&str> = teams["audit_logs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["deleted", "created"], "newest first");
    let deleted = &teams["audit_logs"][0];
    assert_eq!(deleted["before_value"]["team_id"], "t-aud");
    assert!(deleted["updated_values"].is_null());
    // The console's page shows them.
    let page = b.get(&gw, "/ui/audit?table_name=teams").await;
    assert_eq!(page.status, 200);
    assert!(page.text().contains("t-aud"));
}

/// The spend page's rows download as CSV: one line per day, team, key and model group.
#[tokio::test]
async fn spend_downloads_as_csv() {
    let gw = gateway(&config("")).await;
    let a = send(
        "POST",
        &gw.url("/v1/chat/completions"),
        r#"{"model":"cheap","messages":[{"role":"user","content":"spend me"}]}"#,
        &[
            ("authorization", &format!("Bearer {MASTER}")),
            ("content-type", "application/json"),
        ],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let mut b = Browser::default();
    assert_eq!(b.sign_in(&gw, "", MASTER).await.status, 303);
    assert!(b
        .get(&gw, "/ui/spend?days=1")
        .await
        .text()
        .contains(r#"href="/ui/spend.csv?days=1""#));
    let got = b
        .get_until(&gw, "/ui/spend.csv?days=1", |a| {
            a.text().lines().count() > 1
        })
        .await;
    assert_eq!(got.status, 200);
    assert!(got.header("content-type").unwrap().starts_with("text/csv"));
    assert!(got
        .header("content-disposition")
        .unwrap()
        .contains("sluice-spend.csv"));
    let csv = got.text();
    let mut lines = csv.lines();
    assert_eq!(
        lines.next(),
        Some("day,team_id,api_key,model_group,requests,failed_requests,prompt_tokens,completion_tokens,spend,key_alias,key_name,team_alias")
    );
    let row: Vec<&str> = lines
        .next()
        .expect("a row once the batch landed")
        .split(',')
        .collect();
    assert_eq!(row[0], time::OffsetDateTime::now_utc().date().to_string());
    assert_eq!(row[3], "cheap");
    assert_eq!(row[4], "1");
    assert!(row[8].parse::<f64>().unwrap() > 0.0, "{csv}");
}

/// The request ids a logs page lists, in order (each row links its id).
fn listed(html: &str) -> Vec<&str> {
    html.split(r#"href="/ui/logs?request_id="#)
        .skip(1)
        .filter_map(|s| s.split('"').next())
        .collect()
}

/// A chat request to `model` with `key` (and `extra` headers); the prompt names
/// `secret-prompt-words`, to be found in spend logs only when prompts are stored.
async fn chat(gw: &Gateway, key: &str, model: &str, extra: &[(&str, &str)]) -> Answer {
    let auth = format!("Bearer {key}");
    let mut headers = vec![
        ("content-type", "application/json"),
        ("authorization", auth.as_str()),
    ];
    headers.extend_from_slice(extra);
    let body = format!(
        r#"{{"model":"{model}","messages":[{{"role":"user","content":"say hi secret-prompt-words"}}]}}"#
    );
    send("POST", &gw.url("/v1/chat/completions"), body, &headers).await
}

/// The spend log of the request `answer` answered, once the writer's batch has landed.
async fn logged(gw: &Gateway, answer: &Answer) -> Value {
    logged_as(gw, MASTER, answer).await
}

fn models_config(models: &str, general: &str) -> String {
    format!(
        "model_list:\n{models}general_settings:\n  master_key: {MASTER}\n  proxy_batch_write_at: 0.1\n{general}"
    )
}

fn mock_group(group: &str) -> String {
    format!(
        "  - model_name: {group}\n    litellm_params:\n      model: mock/{group}\n      input_cost_per_token: 0.000001\n    model_info:\n      id: {group}-1\n"
    )
}

#[tokio::test]
async fn log_filters_narrow_the_list() {
    let models = ["cheap", "other", "flaky"].map(mock_group).concat();
    let gw = gateway(&models_config(&models, "")).await;
    admin(&gw, "POST", "/team/new", json!({"team_id": "search"})).await;
    let key = admin(
        &gw,
        "POST",
        "/key/generate",
        json!({"key_alias": "app-a", "team_id": "search"}),
    )
    .await
    .json()["key"]
        .as_str()
        .unwrap()
        .to_owned();
    // Apart in time: the list is newest first, and rows of one millisecond have no order
    // (wall time: what is spaced out is the rows' timestamps).
    let a = chat(&gw, &key, "cheap", &[]).await;
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let b = chat(&gw, MASTER, "other", &[]).await;
    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    let c = chat(&gw, MASTER, "flaky", &[("x-mock-status", "500")]).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(b.status, 200, "{}", b.text());
    assert!(c.status.is_server_error(), "{}", c.text());
    let (la, _, _) = (
        logged(&gw, &a).await,
        logged(&gw, &b).await,
        logged(&gw, &c).await,
    );
    let id = |x: &Answer| x.header("x-request-id").unwrap().to_owned();
    let (ia, ib, ic) = (id(&a), id(&b), id(&c));

    let mut br = Browser::default();
    br.sign_in(&gw, "admin", MASTER).await;
    let tomorrow = (time::OffsetDateTime::now_utc() + time::Duration::days(1)).date();
    let hash = la["api_key"].as_str().unwrap().to_owned();
    for (query, want) in [
        ("key=app-a".to_owned(), vec![&ia]),
        (format!("key={hash}"), vec![&ia]),
        ("team=search".to_owned(), vec![&ia]),
        ("model=other".to_owned(), vec![&ib]),
        ("status=failure".to_owned(), vec![&ic]),
        ("status=success&model=cheap".to_owned(), vec![&ia]),
        ("start=2099-01-01T00:00".to_owned(), vec![]),
        (format!("end={tomorrow}T00:00&model=flaky"), vec![&ic]),
        (format!("end={tomorrow}T00:00"), vec![&ic, &ib, &ia]),
    ] {
        let page = br.get(&gw, &format!("/ui/logs?{query}")).await;
        assert_eq!(page.status, 200, "{query}: {}", page.text());
        let html = page.text();
        let want: Vec<&str> = want.iter().map(|s| s.as_str()).collect();
        assert_eq!(listed(&html), want, "{query}");
    }
    // The same filters on the management API, and a wrong value named.
    let api = admin(
        &gw,
        "GET",
        "/spend/logs?key_alias=app-a&status=success",
        Value::Null,
    )
    .await;
    assert_eq!(api.json().as_array().unwrap().len(), 1, "{}", api.text());
    let bad = admin(&gw, "GET", "/spend/logs?status=maybe", Value::Null).await;
    assert_eq!(bad.status, 400, "{}", bad.text());
}

#[tokio::test]
async fn the_detail_shows_the_attempts_of_a_request_that_fell_back() {
    let bad = mock_server(sluice_mock::MockSettings {
        faults: sluice_mock::Faults {
            status: Some(500),
            ..Default::default()
        },
        ..Default::default()
    })
    .await;
    let models = format!(
        "  - model_name: m\n    litellm_params:\n      model: openai/up\n      api_base: {}\n      api_key: sk-up\n    model_info:\n      id: bad\n{}",
        bad.base(),
        mock_group("backup")
    );
    let yaml = format!(
        "{}router_settings:\n  retry_backoff_ms: 1\n  fallbacks:\n    - m: [backup]\n",
        models_config(&models, "")
    );
    let gw = gateway(&yaml).await;
    let a = chat(&gw, MASTER, "m", &[]).await;
    assert_eq!(a.status, 200, "{}", a.text());
    let retries = a
        .header("x-sluice-attempted-retries")
        .unwrap_or("0")
        .to_owned();
    let fallbacks = a.header("x-sluice-attempted-fallbacks").unwrap().to_owned();
    assert_eq!(fallbacks, "1");
    let row = logged(&gw, &a).await;
    assert_eq!(row["requested_model"], "m", "{row}");
    assert_eq!(row["model_group"], "backup", "{row}");
    let attempts = row["attempts"].as_array().unwrap();
    assert!(attempts.len() >= 2, "{row}");
    assert_eq!(attempts[0]["model_id"], "bad");
    assert_eq!(attempts.last().unwrap()["model_id"], "backup-1");
    assert_eq!(attempts.last().unwrap()["result"], "ok");
    assert!(row["overhead_ms"].as_f64().unwrap() > 0.0, "{row}");
    // Prompts are not kept without store_prompts_in_spend_logs.
    assert!(row["messages"].is_null(), "{row}");

    let mut br = Browser::default();
    br.sign_in(&gw, "admin", MASTER).await;
    let list = br.get(&gw, "/ui/logs").await.text();
    let link = format!("/ui/logs/detail?id={}", row["id"].as_str().unwrap());
    assert!(list.contains(&link), "{list}");
    // Each row's duration, and a whole answer's first byte (its duration, said so).
    assert!(list.contains("<th class=\"num\">Duration</th>"), "{list}");
    assert!(list.contains(" ms (whole answer)"), "{list}");
    let page = br.get(&gw, &link).await;
    assert_eq!(page.status, 200, "{}", page.text());
    let html = page.text();
    assert!(html.contains(r#"id="requested">m<"#), "{html}");
    assert!(html.contains(r#"id="served">backup<"#), "{html}");
    assert!(
        html.contains(&format!(r#"id="routing">{retries} / {fallbacks} / 0<"#)),
        "{html}"
    );
    let table = &html[html.find(r#"id="attempts""#).expect("an attempts table")..];
    assert!(
        table.contains(">bad<") && table.contains(">backup-1<"),
        "{table}"
    );
    assert!(
        table.contains(r#"class="state-failure">server<"#),
        "{table}"
    );
    assert!(table.contains(r#"class="state-success">ok<"#), "{table}");
    assert!(html.contains(r#"id="no-content""#) && !html.contains("secret-prompt-words"));
    // An id that is not one: 404.
    assert_eq!(br.get(&gw, "/ui/logs/detail?id=nope").await.status, 404);
}

#[tokio::test]
async fn prompts_show_in_the_detail_only_with_store_prompts_in_spend_logs() {
    let gw = gateway(&models_config(
        &mock_group("cheap"),
        "  store_prompts_in_spend_logs: true\n",
    ))
    .await;
    let a = chat(&gw, MASTER, "cheap", &[]).await;
    assert_eq!(a.status, 200, "{}", a.text());
    let row = logged(&gw, &a).await;
    assert_eq!(
        row["messages"][0]["content"], "say hi secret-prompt-words",
        "{row}"
    );
    assert!(row["response"]["choices"].is_array(), "{row}");
    // Lists leave them out.
    let list = admin(&gw, "GET", "/spend/logs", Value::Null).await.json();
    assert!(list[0]["messages"].is_null(), "{list}");
    let mut br = Browser::default();
    br.sign_in(&gw, "admin", MASTER).await;
    let html = br
        .get(
            &gw,
            &format!("/ui/logs/detail?id={}", row["id"].as_str().unwrap()),
        )
        .await
        .text();
    let prompt = &html[html.find(r#"id="messages""#).expect("the prompt")..];
    assert!(prompt.contains("secret-prompt-words"), "{html}");
    assert!(html.contains(r#"id="response""#), "{html}");
}

#[tokio::test]
async fn an_internal_user_opens_only_their_own_requests() {
    let gw = gateway(&models_config(&mock_group("cheap"), "")).await;
    admin(
        &gw,
        "POST",
        "/user/new",
        json!({"user_id": "ana", "user_role": "internal_user",
               "password": "ana's long passphrase", "auto_create_key": false}),
    )
    .await;
    let token = |a: Answer| a.json()["key"].as_str().unwrap().to_owned();
    let anas = token(
        admin(
            &gw,
            "POST",
            "/key/generate",
            json!({"key_alias": "anas", "user_id": "ana"}),
        )
        .await,
    );
    let zeds = token(
        admin(
            &gw,
            "POST",
            "/key/generate",
            json!({"key_alias": "zeds", "user_id": "zed"}),
        )
        .await,
    );
    let mine = logged(&gw, &chat(&gw, &anas, "cheap", &[]).await).await;
    let theirs = logged(&gw, &chat(&gw, &zeds, "cheap", &[]).await).await;
    let admins = logged(&gw, &chat(&gw, MASTER, "cheap", &[]).await).await;
    let mut br = Browser::default();
    assert_eq!(
        br.sign_in(&gw, "ana", "ana's long passphrase").await.status,
        303
    );
    let detail = |row: &Value| format!("/ui/logs/detail?id={}", row["id"].as_str().unwrap());
    assert_eq!(br.get(&gw, &detail(&mine)).await.status, 200);
    for other in [&theirs, &admins] {
        let page = br.get(&gw, &detail(other)).await;
        assert_eq!(page.status, 404, "{}", page.text());
    }
    // Whatever the filters say, her own requests only.
    let mine_id = mine["request_id"].as_str().unwrap();
    for query in ["", "?model=cheap", "?key=zeds", "?status=success"] {
        let html = br.get(&gw, &format!("/ui/logs{query}")).await.text();
        let want: Vec<&str> = if query == "?key=zeds" {
            vec![]
        } else {
            vec![mine_id]
        };
        assert_eq!(listed(&html), want, "{query}");
    }
    let theirs_id = theirs["request_id"].as_str().unwrap();
    let looked_up = br
        .get(&gw, &format!("/ui/logs?request_id={theirs_id}"))
        .await
        .text();
    assert!(listed(&looked_up).is_empty());
}

#[tokio::test]
async fn the_spend_page_draws_daily_charts_and_the_overview_tops_and_rate() {
    let gw = gateway(&models_config(&mock_group("cheap"), "")).await;
    let a = chat(&gw, MASTER, "cheap", &[]).await;
    logged(&gw, &a).await;
    let mut br = Browser::default();
    br.sign_in(&gw, "admin", MASTER).await;
    // The rollup lands with the same batch as the log.
    let spend = br.get(&gw, "/ui/spend?days=7").await.text();
    let charts = &spend[spend.find(r#"id="charts""#).expect("charts")..];
    assert_eq!(
        charts.matches("<svg").count() - charts.matches(r#"aria-hidden="true""#).count(),
        4
    );
    for title in ["by team", "by model group", "by key", "by provider"] {
        assert!(
            charts.contains(&format!("<title>Daily spend {title}</title>")),
            "{title}"
        );
    }
    let today = time::OffsetDateTime::now_utc().date();
    assert!(
        charts.contains(&format!("<title>{today} · cheap: $")),
        "{charts}"
    );
    assert!(
        charts.contains(&format!("<title>{today} · mock: $")),
        "provider from the config"
    );
    let overview = br.get(&gw, "/ui/").await.text();
    assert!(
        overview.contains(r#"id="top-models""#)
            && overview.contains(r#"href="/ui/logs?model=cheap""#),
        "{overview}"
    );
    assert!(overview.contains(r#"id="top-keys""#), "{overview}");
    assert!(overview.contains(r#"id="rps""#), "{overview}");
    // Three requests between two samples a little over a second apart: a rate above zero and
    // at most three a second (wall time: the overview samples its rate over real seconds).
    for _ in 0..3 {
        assert_eq!(chat(&gw, MASTER, "cheap", &[]).await.status, 200);
    }
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let again = br.get(&gw, "/ui/").await.text();
    let rps = &again[again.find(r#"id="rps""#).unwrap()..];
    let rps = &rps[rps.find('>').unwrap() + 1..];
    let rps: f64 = rps[..rps.find('<').unwrap()]
        .trim()
        .parse()
        .expect("a rate after a second");
    assert!(rps > 0.0 && rps <= 3.0, "{rps}");
}

/// End users (customers) are made, listed, edited, blocked and deleted from their pages, and
/// the gateway enforces what the page set. A virtual key sends the requests: the master key
/// has no limits, an end user's included.
#[tokio::test]
async fn customers_are_made_edited_blocked_and_deleted_from_their_pages() {
    let gw = gateway(&config("")).await;
    let made = admin(&gw, "POST", "/key/generate", json!({})).await;
    assert_eq!(made.status, 200, "{}", made.text());
    let auth = format!("Bearer {}", made.json()["key"].as_str().unwrap());
    let as_customer = || async {
        send(
            "POST",
            &gw.url("/v1/chat/completions"),
            r#"{"model":"cheap","user":"cust-1","messages":[{"role":"user","content":"hi"}]}"#,
            &[
                ("content-type", "application/json"),
                ("authorization", &auth),
            ],
        )
        .await
    };
    let mut b = Browser::default();
    assert_eq!(b.sign_in(&gw, "admin", MASTER).await.status, 303);
    let list = b.get(&gw, "/ui/customers").await;
    assert_eq!(list.status, 200, "{}", list.text());
    let csrf = csrf_of(&list.text());

    // Made from the form; the alias is shown as text.
    let new = b
        .post(
            &gw,
            "/ui/customers/new",
            &[
                ("csrf", &csrf),
                ("user_id", "cust-1"),
                ("alias", "Acme <b>"),
                ("max_budget", ""),
                ("budget_duration", "30d"),
                ("rpm_limit", "100"),
                ("tpm_limit", ""),
            ],
        )
        .await;
    assert_eq!(new.status, 303, "{}", new.text());
    assert_eq!(new.header("location"), Some("/ui/customers"));
    let c = admin(&gw, "GET", "/customer/info?end_user_id=cust-1", Value::Null)
        .await
        .json();
    assert_eq!(c["alias"], "Acme <b>");
    assert_eq!(c["litellm_budget_table"]["rpm_limit"], 100);
    assert_eq!(c["litellm_budget_table"]["budget_duration"], "30d");
    assert_eq!(c["litellm_budget_table"]["max_budget"], Value::Null);
    let list = b.get(&gw, "/ui/customers").await.text();
    assert!(
        list.contains(r#"href="/ui/customers/edit?user_id=cust-1""#),
        "{list}"
    );
    assert!(list.contains("Acme &lt;b&gt;") && !list.contains("Acme <b>"));
    assert!(
        list.contains(r#"href="/ui/customers">Customers</a>"#),
        "nav"
    );
    let bad = b
        .post(
            &gw,
            "/ui/customers/new",
            &[
                ("csrf", &csrf),
                ("user_id", "cust-2"),
                ("rpm_limit", "many"),
            ],
        )
        .await;
    assert_eq!(bad.status, 400, "{}", bad.text());
    assert!(bad.text().contains("rpm_limit"), "{}", bad.text());
    assert_eq!(
        admin(&gw, "GET", "/customer/info?end_user_id=cust-2", Value::Null)
            .await
            .status,
        404
    );

    // A request as that end user; its spend shows once the spend writer's batch lands.
    let a = as_customer().await;
    assert_eq!(a.status, 200, "{}", a.text());
    let cookie = b.cookie_header();
    let spent = eventually(std::time::Duration::from_secs(10), || async {
        let page = send(
            "GET",
            &gw.url("/ui/customers/edit?user_id=cust-1"),
            "",
            &[("cookie", &cookie)],
        )
        .await
        .text();
        page.contains(r#"id="spend""#) && !page.contains("Spend $0.00 ")
    })
    .await;
    assert!(spent, "the end user's spend never showed");
    let page = b.get(&gw, "/ui/customers/edit?user_id=cust-1").await.text();
    assert!(page.contains(r#"value="Acme &lt;b&gt;""#), "{page}");
    assert!(page.contains(r#"value="30d""#), "{page}");
    let csrf = csrf_of(&page);

    // A tiny budget from the edit page: the next request is refused.
    let form = |budget: &'static str, blocked: &'static str| {
        [
            ("csrf", csrf.as_str()),
            ("user_id", "cust-1"),
            ("alias", "Acme"),
            ("max_budget", budget),
            ("budget_duration", ""),
            ("rpm_limit", ""),
            ("tpm_limit", ""),
            ("blocked", blocked),
        ]
    };
    let saved = b
        .post(&gw, "/ui/customers/update", &form("0.000000001", "false"))
        .await;
    assert_eq!(saved.status, 303, "{}", saved.text());
    let c = admin(&gw, "GET", "/customer/info?end_user_id=cust-1", Value::Null)
        .await
        .json();
    assert_eq!(c["alias"], "Acme");
    assert_eq!(c["litellm_budget_table"]["max_budget"], 1e-9);
    assert_eq!(c["litellm_budget_table"]["rpm_limit"], Value::Null);
    assert_eq!(c["litellm_budget_table"]["budget_duration"], Value::Null);
    let r = as_customer().await;
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(r.json()["error"]["type"], "budget_exceeded", "{}", r.text());

    // Blocked (and the budget lifted): 403.
    let saved = b.post(&gw, "/ui/customers/update", &form("", "true")).await;
    assert_eq!(saved.status, 303, "{}", saved.text());
    let r = as_customer().await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(
        r.json()["error"]["code"],
        "end_user_blocked",
        "{}",
        r.text()
    );
    let list = b.get(&gw, "/ui/customers").await.text();
    assert!(
        list.contains(r#"<span class="error">blocked</span>"#),
        "{list}"
    );

    // A post without the CSRF token changes nothing.
    let forged = b
        .post(&gw, "/ui/customers/delete", &[("user_id", "cust-1")])
        .await;
    assert_eq!(forged.status, 403, "{}", forged.text());
    assert_eq!(
        admin(&gw, "GET", "/customer/info?end_user_id=cust-1", Value::Null)
            .await
            .status,
        200
    );

    // An internal user sees no customers and cannot change them.
    admin(
        &gw,
        "POST",
        "/user/new",
        json!({"user_id": "ivy", "user_role": "internal_user", "password": "ivy's long passphrase", "auto_create_key": false}),
    )
    .await;
    let mut ivy = Browser::default();
    assert_eq!(
        ivy.sign_in(&gw, "ivy", "ivy's long passphrase")
            .await
            .status,
        303
    );
    assert_eq!(ivy.get(&gw, "/ui/customers").await.status, 403);
    assert_eq!(
        ivy.get(&gw, "/ui/customers/edit?user_id=cust-1")
            .await
            .status,
        403
    );
    let ivys = ivy.get(&gw, "/ui/keys").await.text();
    assert!(!ivys.contains("/ui/customers"), "no nav link for her");
    let refused = ivy
        .post(
            &gw,
            "/ui/customers/delete",
            &[("csrf", &csrf_of(&ivys)), ("user_id", "cust-1")],
        )
        .await;
    assert_eq!(refused.status, 404);

    // Deleted from the edit page, once the spend logs of its three requests have landed (a
    // request's log names its end user, and writing it makes the end user again).
    let landed = eventually(std::time::Duration::from_secs(10), || async {
        let logs = admin(&gw, "GET", "/spend/logs?limit=100", Value::Null)
            .await
            .json();
        logs.as_array()
            .is_some_and(|l| l.iter().filter(|x| x["end_user"] == "cust-1").count() >= 3)
    })
    .await;
    assert!(landed, "the end user's spend logs never landed");
    let gone = b
        .post(
            &gw,
            "/ui/customers/delete",
            &[("csrf", &csrf), ("user_id", "cust-1"), ("confirmed", "yes")],
        )
        .await;
    assert_eq!(gone.status, 303, "{}", gone.text());
    assert_eq!(
        admin(&gw, "GET", "/customer/info?end_user_id=cust-1", Value::Null)
            .await
            .status,
        404
    );
    let list = b.get(&gw, "/ui/customers").await.text();
    assert!(list.contains("End user cust-1 deleted."), "{list}");
    assert!(!list.contains("user_id=cust-1"), "{list}");
    assert_eq!(
        b.get(&gw, "/ui/customers/edit?user_id=cust-1").await.status,
        404
    );
}

/// A refused request's row says what the client got (status and error code), in the
/// management API's log and on the console's request page.
#[tokio::test]
async fn a_refused_requests_detail_shows_its_status_and_error() {
    let gw = gateway(&config("")).await;
    let made = admin(&gw, "POST", "/key/generate", json!({"rpm_limit": 1})).await;
    let key = made.json()["key"].as_str().unwrap().to_owned();
    assert_eq!(chat(&gw, &key, "cheap", &[]).await.status, 200);
    let refused = chat(&gw, &key, "cheap", &[]).await;
    assert_eq!(refused.status, 429, "{}", refused.text());
    let row = logged(&gw, &refused).await;
    assert_eq!(row["status"], "failure", "{row}");
    assert_eq!(row["error"], "429 rpm_limit_exceeded", "{row}");
    let mut b = Browser::default();
    b.sign_in(&gw, "admin", MASTER).await;
    let page = b
        .get(
            &gw,
            &format!("/ui/logs/detail?id={}", row["id"].as_str().unwrap()),
        )
        .await
        .text();
    assert!(page.contains("429 rpm_limit_exceeded"), "{page}");
}

/// LiteLLM's `upperbound_key_generate_params` hold a key an internal user makes in the console:
/// over the bound is refused, naming the field; within it, made.
#[tokio::test]
async fn an_internal_users_console_key_is_held_to_the_upper_bounds() {
    let gw = gateway(&config(
        "litellm_settings:\n  upperbound_key_generate_params: {max_budget: 10}\n",
    ))
    .await;
    let made = admin(
        &gw,
        "POST",
        "/user/new",
        json!({"user_id": "uma", "user_role": "internal_user", "password": "uma's long passphrase", "auto_create_key": false}),
    )
    .await;
    assert_eq!(made.status, 200, "{}", made.text());
    let mut b = Browser::default();
    assert_eq!(
        b.sign_in(&gw, "uma", "uma's long passphrase").await.status,
        303
    );
    let csrf = csrf_of(&b.get(&gw, "/ui/keys").await.text());
    let over = b
        .post(
            &gw,
            "/ui/keys/new",
            &[
                ("csrf", &csrf),
                ("key_alias", "big"),
                ("max_budget", "1000"),
            ],
        )
        .await;
    assert_eq!(over.status, 400, "{}", over.text());
    assert!(over.text().contains("max_budget"), "{}", over.text());
    let within = b
        .post(
            &gw,
            "/ui/keys/new",
            &[("csrf", &csrf), ("key_alias", "small"), ("max_budget", "5")],
        )
        .await;
    assert_eq!(within.status, 303, "{}", within.text());
    let listed = admin(&gw, "GET", "/key/list?key_alias=big", Value::Null).await;
    assert_eq!(listed.json()["total_count"], 0);
}

/// A stored deployment's edit form is filled from what is stored, prices included: saving it
/// unchanged keeps them (an empty price field would remove the deployment's price).
#[tokio::test]
async fn a_stored_deployments_edit_form_keeps_its_prices() {
    let gw = gateway(&config("  store_model_in_db: true\n")).await;
    let made = admin(
        &gw,
        "POST",
        "/model/new",
        json!({
            "model_name": "priced",
            "litellm_params": {
                "model": "mock/priced",
                "rpm": 7,
                "input_cost_per_token": 0.25,
                "output_cost_per_token": 0.5
            },
            "model_info": {"mode": "chat"}
        }),
    )
    .await;
    assert_eq!(made.status, 200, "{}", made.text());
    let id = made.json()["model_id"].as_str().unwrap().to_owned();
    let mut b = Browser::default();
    assert_eq!(b.sign_in(&gw, "", MASTER).await.status, 303);
    let edit = b.get(&gw, &format!("/ui/models/edit?id={id}")).await;
    assert_eq!(edit.status, 200, "{}", edit.text());
    let html = edit.text();
    for (field, value) in [
        ("model", "mock/priced"),
        ("rpm", "7"),
        ("input_cost_per_token", "0.25"),
        ("output_cost_per_token", "0.5"),
        ("model_name", "priced"),
    ] {
        assert!(
            html.contains(&format!(r#"name="{field}" value="{value}""#))
                || html.contains(&format!(r#"name="{field}" required value="{value}""#))
                || html.contains(&format!(r#"name="{field}" type="number" value="{value}""#)),
            "{field}={value}: {html}"
        );
    }
    assert!(html.contains(r#"<option value="chat" selected>"#), "{html}");
    assert!(html.contains("Added by admin"), "{html}");
    // Saved as shown: the prices stay.
    let saved = b
        .post(
            &gw,
            "/ui/models/update",
            &[
                ("csrf", &csrf_of(&html)),
                ("id", &id),
                ("model_name", "priced"),
                ("model", "mock/priced"),
                ("rpm", "7"),
                ("input_cost_per_token", "0.25"),
                ("output_cost_per_token", "0.5"),
                ("mode", "chat"),
            ],
        )
        .await;
    assert_eq!(saved.status, 303, "{}", saved.text());
    let rt = gw.state.runtime().unwrap();
    let row = rt.store().model(&id).await.unwrap().unwrap();
    let params = rt.params(&row).unwrap();
    assert_eq!(params["input_cost_per_token"], 0.25);
    assert_eq!(params["output_cost_per_token"], 0.5);
}
