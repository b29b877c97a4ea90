//! LiteLLM's clients, unchanged (issue 36): the management API with the fields LiteLLM's own
//! clients send, a key's and a team's aliases, self-service reads, LiteLLM's headers both
//! ways, the Azure deployment route, several models in one request and the moderations
//! default model, each driven over HTTP as those clients do.

use crate::common::*;
use serde_json::{json, Value};
use sluice_mock::MockSettings;

fn config(base: &str) -> String {
    let group = |name: &str, id: &str| {
        format!(
            "  - model_name: {name}\n    litellm_params:\n      model: openai/{name}-up\n      api_base: {base}\n      api_key: sk-up\n      input_cost_per_token: 0.001\n      output_cost_per_token: 0.001\n    model_info:\n      id: {id}\n"
        )
    };
    format!(
        "model_list:\n{}{}{}general_settings:\n  master_key: sk-master\n",
        group("gpt-4", "g4"),
        group("gpt-3.5-turbo", "g35"),
        group("omni-moderation-latest", "mod"),
    )
}

async fn call(gw: &Gateway, key: &str, method: &str, path: &str, body: Value) -> Answer {
    admin_as(gw, key, method, path, body).await
}

/// A chat completion as `key`.
async fn ask(gw: &Gateway, key: &str, body: Value) -> Answer {
    call(gw, key, "POST", "/v1/chat/completions", body).await
}

fn chat(model: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": "hi"}]})
}

#[tokio::test]
async fn management_calls_take_litellms_fields() {
    let up = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(&up.base())).await;
    // /key/generate as LiteLLM's tests send it.
    let k = call(
        &gw,
        "sk-master",
        "POST",
        "/key/generate",
        json!({
            "models": ["gpt-4", "gpt-3.5-turbo"], "aliases": {"mistral-7b": "gpt-3.5-turbo"},
            "duration": null,
            "max_budget": null, "budget_duration": null, "tags": ["t1"], "soft_budget": 5,
            "model_rpm_limit": {"gpt-4": 10}, "key_type": "llm_api"
        }),
    )
    .await;
    assert_eq!(k.status, 200, "{}", k.text());
    let key = k.json()["key"].as_str().unwrap().to_owned();
    assert_eq!(k.json()["metadata"]["tags"], json!(["t1"]));
    // A typo still fails, naming the field.
    let typo = call(
        &gw,
        "sk-master",
        "POST",
        "/key/generate",
        json!({"max_budjet": 1}),
    )
    .await;
    assert_eq!(typo.status, 400);
    assert!(typo.text().contains("max_budjet"), "{}", typo.text());
    // A wrong shape for an acted-on field is a 400 naming it.
    let bad = call(
        &gw,
        "sk-master",
        "POST",
        "/key/generate",
        json!({"aliases": ["x"]}),
    )
    .await;
    assert_eq!(bad.status, 400);
    assert!(bad.text().contains("aliases"), "{}", bad.text());
    // The alias reaches its group.
    let a = ask(&gw, &key, chat("mistral-7b")).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.header("x-litellm-model-group"), Some("gpt-3.5-turbo"));
    assert_eq!(a.header("x-sluice-model-id"), Some("g35"));
    // A key's own alias grants nothing: naming an allowed model as an alias of another does
    // not reach the other (a user who makes their own keys could otherwise escape its lists).
    let sneaky = new_key(
        &gw,
        json!({"models": ["gpt-4"], "aliases": {"gpt-4": "gpt-3.5-turbo"}}),
    )
    .await;
    let a = ask(&gw, &sneaky, chat("gpt-4")).await;
    assert_eq!(a.status, 401, "{}", a.text());
    // Team: members_with_roles and model_aliases on /team/new, by id and by email.
    let t = call(
        &gw,
        "sk-master",
        "POST",
        "/team/new",
        json!({
            "team_alias": "my-new-team",
            "members_with_roles": [{"role": "admin", "user_id": "u-admin"},
                                   {"role": "user", "user_email": "x@example.com"}],
            "model_aliases": {"team-model": "gpt-4"}
        }),
    )
    .await;
    assert_eq!(t.status, 200, "{}", t.text());
    let team = t.json()["team_id"].as_str().unwrap().to_owned();
    assert_eq!(t.json()["members_with_roles"].as_array().unwrap().len(), 2);
    let tk = new_key(&gw, json!({"team_id": team})).await;
    let a = ask(&gw, &tk, chat("team-model")).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.header("x-litellm-model-group"), Some("gpt-4"));
    // Members by email; max_budget_in_team kept.
    let m = call(
        &gw,
        "sk-master",
        "POST",
        "/team/member_update",
        json!({"team_id": team, "user_email": "x@example.com", "max_budget_in_team": 2.5}),
    )
    .await;
    assert_eq!(m.status, 200, "{}", m.text());
    let d = call(
        &gw,
        "sk-master",
        "POST",
        "/team/member_delete",
        json!({"team_id": team, "user_email": "x@example.com"}),
    )
    .await;
    assert_eq!(d.json()["members_with_roles"].as_array().unwrap().len(), 1);
    // /team/update answers LiteLLM's {"data": ...}.
    let u = call(
        &gw,
        "sk-master",
        "POST",
        "/team/update",
        json!({"team_id": team, "team_alias": "renamed"}),
    )
    .await;
    assert_eq!(u.json()["data"]["team_alias"], "renamed");
    // /user/update makes a missing user and sets spend; /user/new takes aliases and teams.
    let s = call(
        &gw,
        "sk-master",
        "POST",
        "/user/update",
        json!({"user_id": "litellm-proxy-budget", "spend": 0}),
    )
    .await;
    assert_eq!(s.status, 200, "{}", s.text());
    let nu = call(
        &gw,
        "sk-master",
        "POST",
        "/user/new",
        json!({"user_id": "u2", "aliases": {"m": "gpt-4"}, "duration": null,
               "teams": [team], "key_alias": "u2-key"}),
    )
    .await;
    assert_eq!(nu.status, 200, "{}", nu.text());
    let ukey = nu.json()["key"].as_str().unwrap().to_owned();
    let a = ask(&gw, &ukey, chat("m")).await;
    assert_eq!(a.status, 200, "{}", a.text());
    // End user: LiteLLM's fields.
    let e = call(
        &gw,
        "sk-master",
        "POST",
        "/end_user/new",
        json!({"user_id": "e1", "budget_id": null, "default_model": "gpt-4",
               "allowed_model_region": "eu"}),
    )
    .await;
    assert_eq!(e.status, 200, "{}", e.text());
    assert_eq!(e.json()["allowed_model_region"], "eu");
}

#[tokio::test]
async fn a_key_reads_its_models_and_litellm_headers_come_back() {
    let up = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(&up.base())).await;
    let key = new_key(&gw, json!({"models": ["gpt-4"]})).await;
    for path in ["/model/info", "/v2/model/info", "/model_group/info"] {
        let a = call(&gw, &key, "GET", path, Value::Null).await;
        assert_eq!(a.status, 200, "{path}: {}", a.text());
        let data = a.json()["data"].as_array().unwrap().clone();
        assert_eq!(data.len(), 1, "{path}: only gpt-4: {data:?}");
        assert!(!a.text().contains("sk-up"), "no provider key");
        assert!(!a.text().contains("api_key"), "no provider key field");
    }
    let admin = call(&gw, "sk-master", "GET", "/model_group/info", Value::Null).await;
    assert_eq!(admin.json()["data"].as_array().unwrap().len(), 3);
    // The request headers LiteLLM reads, and its answer headers.
    let a = send(
        "POST",
        &gw.url("/v1/chat/completions"),
        chat("gpt-4").to_string(),
        &[
            ("content-type", "application/json"),
            ("authorization", &format!("Bearer {key}")),
            ("x-litellm-timeout", "7"),
            ("x-litellm-num-retries", "2"),
        ],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.header("x-litellm-timeout"), Some("7"));
    assert_eq!(a.header("x-litellm-max-retries"), Some("2"));
    assert_eq!(a.header("x-litellm-model-id"), Some("g4"));
    assert_eq!(a.header("x-litellm-attempted-retries"), Some("0"));
    assert!(a.header("x-litellm-call-id").is_some());
    assert!(a.header("x-litellm-response-cost").is_some());
    let bad = send(
        "POST",
        &gw.url("/v1/chat/completions"),
        chat("gpt-4").to_string(),
        &[
            ("content-type", "application/json"),
            ("authorization", &format!("Bearer {key}")),
            ("x-litellm-timeout", "soon"),
        ],
    )
    .await;
    assert_eq!(bad.status, 400);
    assert!(bad.text().contains("x-litellm-timeout"), "{}", bad.text());
}

#[tokio::test]
async fn azure_paths_several_models_and_moderations() {
    let up = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(&up.base())).await;
    // An Azure client: the deployment in the path, `api-key`, no model in the body.
    let a = send(
        "POST",
        &gw.url("/openai/deployments/gpt-4/chat/completions?api-version=2024-06-01"),
        json!({"messages": [{"role": "user", "content": "hi"}]}).to_string(),
        &[
            ("content-type", "application/json"),
            ("api-key", "sk-master"),
        ],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.header("x-sluice-model-id"), Some("g4"));
    // A key held to gpt-3.5-turbo may not use the path to reach gpt-4.
    let only = new_key(&gw, json!({"models": ["gpt-3.5-turbo"]})).await;
    let refused = send(
        "POST",
        &gw.url("/openai/deployments/gpt-4/chat/completions"),
        json!({"messages": [{"role": "user", "content": "hi"}]}).to_string(),
        &[("content-type", "application/json"), ("api-key", &only)],
    )
    .await;
    assert_eq!(refused.status, 401, "{}", refused.text());
    // Several models: a list of answers, one per model, each its own request.
    let both = ask(&gw, "sk-master", chat("gpt-4,gpt-3.5-turbo")).await;
    assert_eq!(both.status, 200, "{}", both.text());
    let list = both.json();
    let list = list.as_array().unwrap();
    assert_eq!(list.len(), 2);
    assert!(list.iter().all(|r| r["choices"].is_array()), "{list:?}");
    // A model the key may not use is refused in its place, the other answered.
    let mixed = ask(&gw, &only, chat("gpt-4,gpt-3.5-turbo")).await;
    let mixed = mixed.json();
    assert!(mixed[0]["error"].is_object(), "{mixed}");
    assert!(mixed[1]["choices"].is_array(), "{mixed}");
    // Moderations with no model: OpenAI's default model group.
    let m = call(
        &gw,
        "sk-master",
        "POST",
        "/v1/moderations",
        json!({"input": "hello"}),
    )
    .await;
    assert_eq!(m.status, 200, "{}", m.text());
    assert_eq!(m.header("x-sluice-model-id"), Some("mod"));
}

#[tokio::test]
async fn internal_users_manage_their_own_keys_only() {
    let up = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(&up.base())).await;
    let made = |id: &str| {
        let gw = &gw;
        let body = json!({"user_id": id, "models": ["gpt-4"]});
        async move {
            let a = call(gw, "sk-master", "POST", "/user/new", body).await;
            assert_eq!(a.status, 200, "{}", a.text());
            a.json()["key"].as_str().unwrap().to_owned()
        }
    };
    let (one, two) = (made("u-one").await, made("u-two").await);
    // A key for itself: made, and its user is the caller's.
    let mine = call(
        &gw,
        &one,
        "POST",
        "/key/generate",
        json!({"key_alias": "extra"}),
    )
    .await;
    assert_eq!(mine.status, 200, "{}", mine.text());
    assert_eq!(mine.json()["user_id"], "u-one");
    let extra = mine.json()["key"].as_str().unwrap().to_owned();
    // Not for another user, not another user's key, not the admin's settings.
    for (path, body) in [
        ("/key/generate", json!({"user_id": "u-two"})),
        ("/key/update", json!({"key": extra, "user_id": "u-two"})),
        (
            "/key/generate",
            json!({"metadata": {"cache": {"namespace": "shared"}}}),
        ),
        (
            "/key/generate",
            json!({"object_permission": {"mcp_servers": ["x"]}}),
        ),
    ] {
        let a = call(&gw, &one, "POST", path, body).await;
        assert_eq!(a.status, 403, "{path}: {}", a.text());
    }
    let theirs = call(&gw, &two, "POST", "/key/delete", json!({"keys": [extra]})).await;
    assert_eq!(theirs.status, 403, "{}", theirs.text());
    let update = call(
        &gw,
        &one,
        "POST",
        "/key/update",
        json!({"key": extra, "max_budget": 1}),
    )
    .await;
    assert_eq!(update.status, 200, "{}", update.text());
    let delete = call(&gw, &one, "POST", "/key/delete", json!({"keys": [extra]})).await;
    assert_eq!(delete.status, 200, "{}", delete.text());
    // A key without a user still reads only its own records.
    let loner = new_key(&gw, json!({})).await;
    let refused = call(&gw, &loner, "POST", "/key/generate", json!({})).await;
    assert_eq!(refused.status, 403, "{}", refused.text());
    // Another key's info: 403; a key that does not exist: 404, as LiteLLM answers.
    let other = call(
        &gw,
        &one,
        "GET",
        &format!("/key/info?key={two}"),
        Value::Null,
    )
    .await;
    assert_eq!(other.status, 403, "{}", other.text());
    let none = call(
        &gw,
        &one,
        "GET",
        "/key/info?key=sk-none-00000000",
        Value::Null,
    )
    .await;
    assert_eq!(none.status, 404, "{}", none.text());
}

#[tokio::test]
async fn litellms_answers_routes_and_records() {
    let up = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(&up.base())).await;
    // A model refusal: LiteLLM's 401 and words.
    let key = new_key(&gw, json!({"models": ["gpt-4"]})).await;
    let refused = ask(&gw, &key, chat("gpt-3.5-turbo")).await;
    assert_eq!(refused.status, 401, "{}", refused.text());
    assert!(
        refused.text().contains("not allowed to access model"),
        "{}",
        refused.text()
    );
    assert_eq!(refused.json()["error"]["type"], "key_model_access_denied");
    // A spent budget: LiteLLM's words.
    let poor = new_key(&gw, json!({"max_budget": 0.0000001})).await;
    let _ = ask(&gw, &poor, chat("gpt-4")).await;
    let spent = eventually(std::time::Duration::from_secs(5), || {
        let (gw, poor) = (&gw, &poor);
        async move {
            let a = call(gw, poor, "POST", "/v1/chat/completions", chat("gpt-4")).await;
            a.status == 400 && a.text().contains("Budget has been exceeded!")
        }
    })
    .await;
    assert!(spent, "the budget refusal carries LiteLLM's words");
    // Routes LiteLLM serves.
    let routes = send("GET", &gw.url("/routes"), "", &[]).await;
    assert_eq!(routes.status, 200);
    assert!(routes.json()["routes"].as_array().unwrap().len() > 10);
    let login = send("POST", &gw.url("/login"), "username=admin", &[]).await;
    assert_eq!(login.status, 303);
    assert_eq!(login.header("location"), Some("/ui/login"));
    let details = call(
        &gw,
        "sk-master",
        "GET",
        "/health/readiness/details",
        Value::Null,
    )
    .await;
    assert!(
        details.json()["litellm_version"].is_string(),
        "{}",
        details.text()
    );
    // Records as LiteLLM shows them: kept columns beside `metadata`, teams on /user/info.
    let k = call(
        &gw,
        "sk-master",
        "POST",
        "/key/generate",
        json!({"metadata": {"test": "new"}, "aliases": {"a": "gpt-4"}, "tags": ["t"]}),
    )
    .await;
    assert_eq!(k.json()["metadata"], json!({"test": "new", "tags": ["t"]}));
    assert_eq!(k.json()["aliases"], json!({"a": "gpt-4"}));
    let t = call(
        &gw,
        "sk-master",
        "POST",
        "/team/new",
        json!({"team_alias": "x"}),
    )
    .await;
    let team = t.json()["team_id"].as_str().unwrap().to_owned();
    let u = call(
        &gw,
        "sk-master",
        "POST",
        "/user/new",
        json!({"user_id": "u9", "team_id": team}),
    )
    .await;
    assert_eq!(u.status, 200, "{}", u.text());
    let info = call(
        &gw,
        "sk-master",
        "GET",
        "/user/info?user_id=u9",
        Value::Null,
    )
    .await;
    assert_eq!(info.json()["teams"][0]["team_id"], team, "{}", info.text());
    let nobody = call(
        &gw,
        "sk-master",
        "POST",
        "/team/member_delete",
        json!({"team_id": team, "user_id": "not-a-member"}),
    )
    .await;
    assert_eq!(nobody.status, 400, "{}", nobody.text());
}

#[tokio::test]
async fn an_end_users_limits_bind_the_master_key_too() {
    let up = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(&up.base())).await;
    let e = call(
        &gw,
        "sk-master",
        "POST",
        "/end_user/new",
        json!({"user_id": "cust", "rpm_limit": 1}),
    )
    .await;
    assert_eq!(e.status, 200, "{}", e.text());
    let mut body = chat("gpt-4");
    body["user"] = json!("cust");
    let first = ask(&gw, "sk-master", body.clone()).await;
    assert_eq!(first.status, 200, "{}", first.text());
    let second = ask(&gw, "sk-master", body).await;
    assert_eq!(second.status, 429, "{}", second.text());
    // Another end user is not held to it.
    let mut other = chat("gpt-4");
    other["user"] = json!("someone-else");
    assert_eq!(ask(&gw, "sk-master", other).await.status, 200);
}

#[tokio::test]
async fn litellms_mock_testing_switches_try_fallbacks_and_retries() {
    let up = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(&up.base())).await;
    let before = up.requests().await;
    // The group asked for fails before any call; the request's fallback serves it.
    let mut body = chat("gpt-4");
    body["mock_testing_fallbacks"] = json!(true);
    body["fallbacks"] = json!(["gpt-3.5-turbo"]);
    let a = ask(&gw, "sk-master", body.clone()).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.header("x-sluice-model-id"), Some("g35"));
    assert_eq!(a.header("x-litellm-attempted-fallbacks"), Some("1"));
    assert_eq!(
        up.requests().await,
        before + 1,
        "only the fallback was called"
    );
    // A fallback the key may not use: the mock failure is the answer, as in LiteLLM.
    let only = new_key(&gw, json!({"models": ["gpt-4"]})).await;
    let refused = ask(&gw, &only, body).await;
    assert_eq!(refused.status, 500, "{}", refused.text());
    assert!(
        refused.text().contains("mock exception"),
        "{}",
        refused.text()
    );
    // A rate limit on the first attempt: one retry serves it.
    let mut body = chat("gpt-4");
    body["mock_testing_rate_limit_error"] = json!(true);
    body["num_retries"] = json!(2);
    let a = ask(&gw, "sk-master", body).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(a.header("x-litellm-attempted-retries"), Some("1"));
    // A switch that is not a boolean is a 400 naming it.
    let mut bad = chat("gpt-4");
    bad["mock_testing_fallbacks"] = json!("yes");
    let a = ask(&gw, "sk-master", bad).await;
    assert_eq!(a.status, 400);
    assert!(a.text().contains("mock_testing_fallbacks"), "{}", a.text());
}

#[tokio::test]
async fn an_end_users_region_picks_the_deployments_there() {
    let up = mock_server(MockSettings::default()).await;
    let base = up.base();
    let yaml = format!(
        "model_list:\n  - model_name: regional\n    litellm_params:\n      model: openai/r\n      api_base: {base}\n      api_key: k\n      region_name: eu\n    model_info:\n      id: in-eu\n  - model_name: regional\n    litellm_params:\n      model: openai/r\n      api_base: {base}\n      api_key: k\n      region_name: us\n    model_info:\n      id: in-us\ngeneral_settings:\n  master_key: sk-master\n"
    );
    let gw = gateway(&yaml).await;
    let e = call(
        &gw,
        "sk-master",
        "POST",
        "/end_user/new",
        json!({"user_id": "eu-customer", "allowed_model_region": "eu"}),
    )
    .await;
    assert_eq!(e.status, 200, "{}", e.text());
    let mut body = chat("regional");
    body["user"] = json!("eu-customer");
    for _ in 0..6 {
        let a = ask(&gw, "sk-master", body.clone()).await;
        assert_eq!(a.status, 200, "{}", a.text());
        assert_eq!(a.header("x-sluice-model-id"), Some("in-eu"));
        assert_eq!(a.header("x-litellm-model-region"), Some("eu"));
    }
    // Without a region, both serve.
    let mut seen = std::collections::HashSet::new();
    for _ in 0..12 {
        let a = ask(&gw, "sk-master", chat("regional")).await;
        seen.insert(a.header("x-sluice-model-id").unwrap_or_default().to_owned());
    }
    assert_eq!(seen.len(), 2, "{seen:?}");
}

#[tokio::test]
async fn a_wildcard_deployment_charges_the_model_asked_for() {
    let up = mock_server(MockSettings::default()).await;
    let base = up.base();
    let yaml = format!(
        "model_list:\n  - model_name: \"*\"\n    litellm_params:\n      model: openai/*\n      api_base: {base}\n      api_key: k\ngeneral_settings:\n  master_key: sk-master\n"
    );
    let gw = gateway(&yaml).await;
    let cost = |a: &Answer| {
        a.header("x-litellm-response-cost")
            .and_then(|c| c.parse::<f64>().ok())
            .unwrap_or_default()
    };
    let a = ask(&gw, "sk-master", chat("gpt-4o")).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert!(
        cost(&a) > 0.0,
        "gpt-4o is priced: {:?}",
        a.header("x-litellm-response-cost")
    );
    let image = json!({"model": "dall-e-3", "prompt": "an otter"});
    let a = call(&gw, "sk-master", "POST", "/v1/images/generations", image).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert!(cost(&a) > 0.0, "dall-e-3 is priced per image");
    // /model_group/info lists the models the wildcard serves, not the pattern.
    let info = call(&gw, "sk-master", "GET", "/model_group/info", Value::Null).await;
    let names: Vec<String> = info.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["model_group"].as_str().unwrap().to_owned())
        .collect();
    assert!(names.iter().any(|n| n == "gpt-4o"), "{names:?}");
    assert!(!names.iter().any(|n| n == "*"), "{names:?}");
    let key = new_key(&gw, json!({"models": ["gpt-4o"]})).await;
    let mine = call(&gw, &key, "GET", "/model_group/info", Value::Null).await;
    let mine = mine.json();
    assert_eq!(mine["data"].as_array().unwrap().len(), 1, "{mine}");
    assert_eq!(mine["data"][0]["model_group"], "gpt-4o");
    // A model the table does not know stays at 0, as before.
    let a = ask(&gw, "sk-master", chat("no-such-model-x")).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(cost(&a), 0.0);
}

#[tokio::test]
async fn litellms_headers_can_be_turned_off() {
    let up = mock_server(MockSettings::default()).await;
    let yaml = config(&up.base()).replace(
        "general_settings:\n",
        "general_settings:\n  litellm_headers: false\n",
    );
    let gw = gateway(&yaml).await;
    let a = ask(&gw, "sk-master", chat("gpt-4")).await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert!(a.header("x-sluice-model-id").is_some());
    assert!(
        a.headers
            .keys()
            .all(|k| !k.as_str().starts_with("x-litellm-")),
        "{:?}",
        a.headers
    );
}

#[tokio::test]
async fn keys_are_made_within_the_configs_upper_bounds() {
    let up = mock_server(MockSettings::default()).await;
    let yaml = format!(
        "{}litellm_settings:\n  upperbound_key_generate_params: {{max_budget: 10, rpm_limit: 100, duration: 30d}}\n",
        config(&up.base())
    );
    let gw = gateway(&yaml).await;
    let user = call(
        &gw,
        "sk-master",
        "POST",
        "/user/new",
        json!({"user_id": "bounded"}),
    )
    .await;
    let user_key = user.json()["key"].as_str().unwrap().to_owned();
    // Left out: the bound. Over it: 400 naming the field, for the admin and a user alike.
    let k = call(
        &gw,
        &user_key,
        "POST",
        "/key/generate",
        json!({"max_budget": 5}),
    )
    .await;
    assert_eq!(k.status, 200, "{}", k.text());
    assert_eq!(
        (
            k.json()["max_budget"].clone(),
            k.json()["rpm_limit"].clone()
        ),
        (json!(5.0), json!(100))
    );
    assert!(k.json()["expires"].is_string(), "{}", k.text());
    for who in [user_key.as_str(), "sk-master"] {
        let over = call(&gw, who, "POST", "/key/generate", json!({"max_budget": 50})).await;
        assert_eq!(over.status, 400, "{}", over.text());
        assert!(
            over.text().contains("max_budget is over max limit"),
            "{}",
            over.text()
        );
        let long = call(
            &gw,
            who,
            "POST",
            "/key/generate",
            json!({"duration": "60d"}),
        )
        .await;
        assert_eq!(long.status, 400, "{}", long.text());
    }
}
