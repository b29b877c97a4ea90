//! End-to-end: the Files and Batches APIs through the gateway to `sluice mock` over HTTP:
//! uploads, lists, content byte for byte, deletes; a batch created, completed and its output
//! read; its usage charged once to the key that created it; sluice's ids opaque and checked;
//! model access.
use crate::common::*;

use serde_json::{json, Value};
use sluice::auth::MasterKey;
use sluice::files::ids::{self, IdKey, Kind};
use sluice_core::Secret;
use sluice_mock::MockSettings;

/// The key the gateway signs ids with (its master key is `sk-master`).
pub(crate) fn id_key() -> IdKey {
    IdKey::new(Some(&MasterKey::new(&Secret::new("sk-master".to_owned()))))
}

pub(crate) fn config(mock_base: &str) -> String {
    format!(
        r#"
model_list:
  - model_name: gpt-batch
    litellm_params:
      model: openai/gpt-4o-mini
      api_base: {mock_base}
      api_key: sk-upstream
  - model_name: other
    litellm_params:
      model: openai/gpt-4o
      api_base: {mock_base}
  - model_name: claude
    litellm_params:
      model: anthropic/claude-sonnet-4-5
      api_key: sk-ant
      api_base: {mock_base}
general_settings:
  master_key: sk-master
"#
    )
}

const BOUNDARY: &str = "sluice-files-test";

/// A multipart upload: text fields and the file.
fn form(fields: &[(&str, &str)], file: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, value) in fields {
        out.extend_from_slice(
            format!("--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
                .as_bytes(),
        );
    }
    out.extend_from_slice(
        format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"input.jsonl\"\r\n\
             Content-Type: application/octet-stream\r\n\r\n"
        )
        .as_bytes(),
    );
    out.extend_from_slice(file);
    out.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    out
}

pub(crate) async fn upload(
    gw: &Gateway,
    auth: &str,
    fields: &[(&str, &str)],
    file: &[u8],
) -> Answer {
    let ct = format!("multipart/form-data; boundary={BOUNDARY}");
    send(
        "POST",
        &gw.url("/v1/files"),
        form(fields, file),
        &[("authorization", auth), ("content-type", &ct)],
    )
    .await
}

#[tokio::test]
async fn files_upload_list_retrieve_content_delete() {
    let mock = mock_server(MockSettings::default()).await;
    let mut gw = gateway(&config(&mock.base())).await;
    let master = "Bearer sk-master";
    // Every byte value, so that the content is compared as bytes, not text.
    let content: Vec<u8> = (0..=255u8).cycle().take(70_000).collect();
    let up = upload(
        &gw,
        master,
        &[("purpose", "batch"), ("target_model_names", "gpt-batch")],
        &content,
    )
    .await;
    assert_eq!(up.status, 200, "{}", up.text());
    let file = up.json();
    let id = file["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("file-sluice-"), "{id}");
    assert_eq!(file["bytes"], 70_000);
    assert_eq!(file["filename"], "input.jsonl");
    let r = gw.next_record().await;
    assert_eq!(r.route, "/v1/files");
    assert_eq!(r.model.as_deref(), Some("gpt-batch"));
    assert_eq!(r.status, 200);
    let held = ids::decode(&id_key(), Kind::File, &id).unwrap();
    assert_eq!(Some(&*held.deployment), r.deployment.as_deref());

    let auth = [MASTER];
    let list = send(
        "GET",
        &gw.url("/v1/files?target_model_names=gpt-batch"),
        "",
        &auth,
    )
    .await;
    assert_eq!(list.status, 200, "{}", list.text());
    assert!(list.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["id"] == id.as_str()));
    let got = send("GET", &gw.url(&format!("/files/{id}")), "", &auth).await;
    assert_eq!(
        (got.status.as_u16(), got.json()["id"].as_str()),
        (200, Some(&*id))
    );
    let body = send(
        "GET",
        &gw.url(&format!("/v1/files/{id}/content")),
        "",
        &auth,
    )
    .await;
    assert_eq!(body.status, 200);
    assert_eq!(&body.body[..], &content[..], "content byte for byte");
    let mut routes = Vec::new();
    for _ in 0..3 {
        let r = gw.next_record().await;
        assert_eq!(r.model.as_deref(), Some("gpt-batch"));
        routes.push(r.route);
    }
    routes.sort_unstable();
    assert_eq!(
        routes,
        ["/v1/files", "/v1/files/{id}", "/v1/files/{id}/content"],
        "list, retrieve and the streamed content are recorded"
    );

    let gone = send("DELETE", &gw.url(&format!("/v1/files/{id}")), "", &auth).await;
    assert_eq!(gone.status, 200, "{}", gone.text());
    assert_eq!(gone.json()["deleted"], true);
    assert_eq!(gone.json()["id"], id.as_str());
    let again = send("GET", &gw.url(&format!("/v1/files/{id}")), "", &auth).await;
    assert_eq!(again.status, 404);

    // Ids sluice did not issue, or that name a deployment it does not have: OpenAI's 404.
    let stranger = ids::encode(&id_key(), Kind::File, "no-such-deployment", None, "file-x");
    for bad in ["file-abc", "file-sluice-%21%21", stranger.as_str()] {
        let a = send("GET", &gw.url(&format!("/v1/files/{bad}")), "", &auth).await;
        assert_eq!(a.status, 404, "{bad}: {}", a.text());
        assert_eq!(a.json()["error"]["type"], "invalid_request_error");
    }
    let a = send("GET", &gw.url("/v1/batches/batch_abc"), "", &auth).await;
    assert_eq!(a.status, 404);

    // A provider without the Files API: 501 naming the pair.
    let a = upload(
        &gw,
        master,
        &[("purpose", "batch"), ("model", "claude")],
        b"x",
    )
    .await;
    assert_eq!(a.status, 501, "{}", a.text());
    assert!(a.text().contains("anthropic"), "{}", a.text());
}

#[tokio::test]
async fn a_batch_completes_and_is_charged_once_to_its_creator() {
    let mock = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(&mock.base())).await;
    let key = new_key(&gw, json!({"models": ["gpt-batch"], "max_budget": 100})).await;
    let bearer = format!("Bearer {key}");
    let auth = [("authorization", bearer.as_str())];
    let lines: String = (0..3)
        .map(|i| {
            format!(
                "{}\n",
                json!({"custom_id": format!("r{i}"), "method": "POST", "url": "/v1/chat/completions",
                       "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello there"}]}})
            )
        })
        .collect();
    let up = upload(
        &gw,
        &bearer,
        &[("purpose", "batch"), ("target_model_names", "gpt-batch")],
        lines.as_bytes(),
    )
    .await;
    assert_eq!(up.status, 200, "{}", up.text());
    let input = up.json()["id"].as_str().unwrap().to_owned();

    let made = send(
        "POST",
        &gw.url("/v1/batches"),
        json!({"input_file_id": input, "endpoint": "/v1/chat/completions", "completion_window": "24h"})
            .to_string(),
        &[auth[0], ("content-type", "application/json")],
    )
    .await;
    assert_eq!(made.status, 200, "{}", made.text());
    let batch = made.json();
    let id = batch["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("batch_sluice-"), "{id}");
    assert_eq!(batch["status"], "validating");
    assert_eq!(
        batch["input_file_id"],
        input.as_str(),
        "the client's file id, not the upstream's"
    );

    let done = send("GET", &gw.url(&format!("/v1/batches/{id}")), "", &auth).await;
    assert_eq!(done.status, 200, "{}", done.text());
    let done = done.json();
    assert_eq!(done["status"], "completed");
    assert_eq!(done["id"], id.as_str());
    let (input_tokens, output_tokens) = (
        done["usage"]["input_tokens"].as_u64().unwrap(),
        done["usage"]["output_tokens"].as_u64().unwrap(),
    );
    assert!(input_tokens > 0 && output_tokens > 0);
    let output = done["output_file_id"].as_str().unwrap();
    assert!(output.starts_with("file-sluice-"), "{output}");
    let out = send(
        "GET",
        &gw.url(&format!("/v1/files/{output}/content")),
        "",
        &auth,
    )
    .await;
    assert_eq!(out.status, 200);
    let answers: Vec<Value> = out
        .text()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(answers.len(), 3);
    assert_eq!(answers[2]["custom_id"], "r2");
    assert_eq!(answers[0]["response"]["body"]["object"], "chat.completion");

    // Charged once, at half of gpt-4o-mini's token prices: the spend header of the next two
    // retrieves (each shows what was charged before it) is the same, and is that cost.
    let spend = |a: &Answer| {
        a.header("x-sluice-key-spend")
            .unwrap()
            .parse::<f64>()
            .unwrap()
    };
    let second = send("GET", &gw.url(&format!("/v1/batches/{id}")), "", &auth).await;
    let third = send("GET", &gw.url(&format!("/v1/batches/{id}")), "", &auth).await;
    assert_eq!(second.json()["status"], "completed");
    let expected = (input_tokens as f64 * 0.15e-6 + output_tokens as f64 * 0.6e-6) / 2.0;
    assert!(
        (spend(&second) - expected).abs() < 1e-9,
        "{} vs {expected}",
        spend(&second)
    );
    assert_eq!(spend(&second), spend(&third), "charged once");
    // One spend row for the batch, under the batch's id (without its creator), on the key.
    let held = ids::decode(&id_key(), Kind::Batch, &id).unwrap();
    let row_id = ids::encode(
        &id_key(),
        Kind::Batch,
        &held.deployment,
        None,
        &held.upstream,
    );
    let url = gw.url(&format!("/spend/logs?request_id={row_id}"));
    let rows = || async {
        send("GET", &url, "", &[MASTER])
            .await
            .json()
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    assert!(eventually(PATIENCE, || async { !rows().await.is_empty() }).await);
    let logged = rows().await;
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert_eq!(logged[0]["prompt_tokens"], input_tokens);
    assert_eq!(logged[0]["completion_tokens"], output_tokens);
    assert_eq!(logged[0]["model_group"], "gpt-batch");
    assert!(logged[0]["api_key"].as_str().is_some_and(|k| !k.is_empty()));

    let list = send(
        "GET",
        &gw.url("/v1/batches?target_model_names=gpt-batch"),
        "",
        &auth,
    )
    .await;
    assert_eq!(list.status, 200, "{}", list.text());
    assert!(list.json()["data"][0]["id"]
        .as_str()
        .unwrap()
        .starts_with("batch_sluice-"));
    let cancelled = send(
        "POST",
        &gw.url(&format!("/v1/batches/{id}/cancel")),
        "",
        &auth,
    )
    .await;
    assert_eq!(cancelled.status, 200, "{}", cancelled.text());

    // A key that may not use the group is refused on uploads; another key's ids are not found.
    let other = new_key(&gw, json!({"models": ["other"]})).await;
    let other_bearer = format!("Bearer {other}");
    let refused = upload(
        &gw,
        &other_bearer,
        &[("purpose", "batch"), ("target_model_names", "gpt-batch")],
        b"{}",
    )
    .await;
    assert_eq!(refused.status, 401, "{}", refused.text());
    let refused = send(
        "GET",
        &gw.url(&format!("/v1/files/{input}")),
        "",
        &[("authorization", other_bearer.as_str())],
    )
    .await;
    assert_eq!(refused.status, 404, "{}", refused.text());
    // Naming no group, its upload lands on the first deployment it may use (`other`), whose
    // group its lines name.
    let line = json!({"custom_id": "o", "method": "POST", "url": "/v1/chat/completions",
                      "body": {"model": "other", "messages": []}});
    let own = upload(
        &gw,
        &other_bearer,
        &[("purpose", "batch")],
        line.to_string().as_bytes(),
    )
    .await;
    assert_eq!(own.status, 200, "{}", own.text());
    let own_id = own.json()["id"].as_str().unwrap().to_owned();
    let mine = send(
        "GET",
        &gw.url(&format!("/v1/files/{own_id}")),
        "",
        &[("authorization", other_bearer.as_str())],
    )
    .await;
    assert_eq!(mine.status, 200, "{}", mine.text());
    let no_key = send("GET", &gw.url(&format!("/v1/files/{input}")), "", &[]).await;
    assert_eq!(no_key.status, 401);
}

#[tokio::test]
async fn azure_gets_its_own_urls_and_the_form_without_sluice_fields() {
    let up = recording(Reply::Json(
        200,
        r#"{"object":"file","id":"file-az1","bytes":3,"filename":"input.jsonl","purpose":"batch"}"#,
    ))
    .await;
    let root = up.base().trim_end_matches("/v1").to_owned();
    let yaml = format!(
        r#"
model_list:
  - model_name: az
    litellm_params:
      model: azure/gpt4o-deployment
      api_base: {root}
      api_key: az-upstream-key
      api_version: "2024-10-21"
general_settings:
  master_key: sk-master
"#
    );
    let gw = gateway(&yaml).await;
    let a = upload(
        &gw,
        "Bearer sk-master",
        &[
            ("purpose", "batch"),
            ("target_model_names", "az"),
            ("custom_llm_provider", "azure"),
        ],
        b"abc",
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    let id = a.json()["id"].as_str().unwrap().to_owned();
    assert_eq!(
        ids::decode(&id_key(), Kind::File, &id).unwrap().upstream,
        "file-az1"
    );
    let got = send(
        "GET",
        &gw.url(&format!("/v1/files/{id}?x=1")),
        "",
        &[MASTER],
    )
    .await;
    assert_eq!(got.status, 200);
    let seen = up.requests();
    assert_eq!(
        seen[0].path_and_query,
        "/openai/files?api-version=2024-10-21"
    );
    assert_eq!(
        seen[1].path_and_query,
        "/openai/files/file-az1?api-version=2024-10-21&x=1"
    );
    assert_eq!(seen[0].headers["api-key"], "az-upstream-key");
    assert!(seen[0].headers.get("authorization").is_none());
    assert_eq!(
        seen[0].headers["content-type"],
        format!("multipart/form-data; boundary={BOUNDARY}").as_str(),
        "the client's boundary"
    );
    assert_eq!(
        seen[0].body,
        form(&[("purpose", "batch")], b"abc"),
        "the form as sent, without target_model_names"
    );
}

#[tokio::test]
async fn large_uploads_are_relayed_to_the_group_their_form_names() {
    let mock = mock_server(MockSettings::default()).await;
    let mut gw = gateway(&config(&mock.base())).await;
    let content: Vec<u8> = (0..3_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect();
    // The group before the file: relayed as it arrives. The group after the file: read until
    // the field, then sent. Either way to the group the form names, byte for byte.
    let before = form(
        &[("purpose", "batch"), ("target_model_names", "other")],
        &content,
    );
    let mut after = form(&[("purpose", "batch")], &content);
    let closing = format!("--{BOUNDARY}--\r\n");
    after.truncate(after.len() - closing.len());
    after.extend_from_slice(
        format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nother\r\n{closing}"
        )
        .as_bytes(),
    );
    let ct = format!("multipart/form-data; boundary={BOUNDARY}");
    for body in [before, after] {
        let up = send(
            "POST",
            &gw.url("/v1/files"),
            body,
            &[MASTER, ("content-type", &ct)],
        )
        .await;
        assert_eq!(up.status, 200, "{}", up.text());
        let id = up.json()["id"].as_str().unwrap().to_owned();
        let r = gw.next_record().await;
        assert_eq!(r.model.as_deref(), Some("other"));
        assert_eq!(
            Some(&*ids::decode(&id_key(), Kind::File, &id).unwrap().deployment),
            r.deployment.as_deref()
        );
        let got = send(
            "GET",
            &gw.url(&format!("/v1/files/{id}/content")),
            "",
            &[MASTER],
        )
        .await;
        assert_eq!(got.status, 200);
        assert!(got.body[..] == content[..], "content byte for byte");
        gw.next_record().await;
    }
}

/// Batch input lines: `models[i]` in line `i + 1`, each with `pad` bytes of prompt.
fn lines_naming(models: &[&str], url: &str, pad: usize) -> String {
    models
        .iter()
        .enumerate()
        .map(|(i, m)| {
            format!(
                "{}\n",
                json!({"custom_id": format!("r{i}"), "method": "POST", "url": url,
                       "body": {"model": m, "messages": [{"role": "user", "content": "x".repeat(pad)}]}})
            )
        })
        .collect()
}

/// The models the lines of a stored file name, read back through the gateway.
async fn stored_models(gw: &Gateway, auth: &str, id: &str) -> Vec<String> {
    let got = send(
        "GET",
        &gw.url(&format!("/v1/files/{id}/content")),
        "",
        &[("authorization", auth)],
    )
    .await;
    assert_eq!(got.status, 200, "{}", got.text());
    got.text()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            v["body"]["model"].as_str().unwrap().to_owned()
        })
        .collect()
}

#[tokio::test]
async fn a_batch_file_runs_only_the_model_its_key_may_use() {
    let mock = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(&mock.base())).await;
    let key = new_key(&gw, json!({"models": ["gpt-batch"]})).await;
    let bearer = format!("Bearer {key}");
    let fields = [("purpose", "batch"), ("target_model_names", "gpt-batch")];

    // A line naming another model (here `other`'s upstream model) is refused by its number,
    // in a small form read whole and in a large one relayed as it arrives.
    let bad = ["gpt-batch", "gpt-4o-mini", "gpt-4o"];
    for (pad, line) in [(10, 3), (2000, 300)] {
        let mut models = vec!["gpt-batch"; line - 1];
        models.push(bad[2]);
        models.extend(["gpt-batch"; 50]);
        let file = lines_naming(&models, "/v1/chat/completions", pad);
        let a = upload(&gw, &bearer, &fields, file.as_bytes()).await;
        assert_eq!(a.status, 400, "{}", a.text());
        let error = &a.json()["error"];
        assert_eq!(error["type"], "invalid_request_error");
        assert_eq!(error["param"], "file");
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains(&format!(
                r#"line {line}: body.model "gpt-4o" is not the model group "gpt-batch""#
            )),
            "{message}"
        );
    }
    // An endpoint batches do not serve, and a line without a model, are refused too.
    let file = lines_naming(&bad[..2], "/v1/images/generations", 10);
    let a = upload(&gw, &bearer, &fields, file.as_bytes()).await;
    assert_eq!(a.status, 400, "{}", a.text());
    assert!(a.text().contains("line 1: url"), "{}", a.text());
    let no_model =
        r#"{"custom_id":"a","method":"POST","url":"/v1/embeddings","body":{"input":"x"}}"#;
    let a = upload(&gw, &bearer, &fields, no_model.as_bytes()).await;
    assert_eq!(a.status, 400, "{}", a.text());
    assert!(a.text().contains("line 1: body.model"), "{}", a.text());

    // Lines naming the group (or its model) pass, and the upstream stores the deployment's
    // model in each: small and large, the large one relayed as it arrives.
    for (pad, n) in [(10, 4), (2000, 400)] {
        let models: Vec<&str> = (0..n).map(|i| bad[i % 2]).collect();
        let file = lines_naming(&models, "/v1/chat/completions", pad);
        let up = upload(&gw, &bearer, &fields, file.as_bytes()).await;
        assert_eq!(up.status, 200, "{}", up.text());
        let up = up.json();
        let id = up["id"].as_str().unwrap();
        let stored = stored_models(&gw, &bearer, id).await;
        assert_eq!(stored, vec!["gpt-4o-mini"; n]);
        let delta = "gpt-4o-mini".len() - "gpt-batch".len();
        assert_eq!(
            up["bytes"].as_u64().unwrap() as usize,
            file.len() + delta * n.div_ceil(2),
            "the rewritten file, whole"
        );
    }
    // A batch of such a file runs on the deployment's model.
    let file = lines_naming(&["gpt-batch"], "/v1/chat/completions", 10);
    let up = upload(&gw, &bearer, &fields, file.as_bytes()).await;
    let input = up.json()["id"].as_str().unwrap().to_owned();
    let made = send(
        "POST",
        &gw.url("/v1/batches"),
        json!({"input_file_id": input, "endpoint": "/v1/chat/completions", "completion_window": "24h"})
            .to_string(),
        &[("authorization", bearer.as_str()), ("content-type", "application/json")],
    )
    .await;
    assert_eq!(made.status, 200, "{}", made.text());

    // The master key may name any model; its lines naming the group are rewritten still.
    let file = lines_naming(&["o1-pro", "gpt-batch"], "/v1/chat/completions", 10);
    let up = upload(&gw, "Bearer sk-master", &fields, file.as_bytes()).await;
    assert_eq!(up.status, 200, "{}", up.text());
    let id = up.json()["id"].as_str().unwrap().to_owned();
    assert_eq!(
        stored_models(&gw, "Bearer sk-master", &id).await,
        ["o1-pro", "gpt-4o-mini"]
    );

    // A second `purpose` after the file cannot turn another upload into an unchecked batch.
    let file = lines_naming(&["gpt-4o"], "/v1/chat/completions", 3000);
    let mut body = form(
        &[
            ("purpose", "user_data"),
            ("target_model_names", "gpt-batch"),
        ],
        file.repeat(100).as_bytes(),
    );
    let closing = format!("--{BOUNDARY}--\r\n");
    body.truncate(body.len() - closing.len());
    body.extend_from_slice(
        format!(
            "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"purpose\"\r\n\r\nbatch\r\n{closing}"
        )
        .as_bytes(),
    );
    let ct = format!("multipart/form-data; boundary={BOUNDARY}");
    let a = send(
        "POST",
        &gw.url("/v1/files"),
        body,
        &[("authorization", bearer.as_str()), ("content-type", &ct)],
    )
    .await;
    assert_eq!(a.status, 400, "{}", a.text());
    assert!(a.text().contains("purpose"), "{}", a.text());
}

#[tokio::test]
async fn a_refused_line_never_reaches_the_upstream_and_passed_lines_arrive_rewritten() {
    let up = recording(Reply::Json(
        200,
        r#"{"object":"file","id":"file-r1","bytes":1,"filename":"input.jsonl","purpose":"batch"}"#,
    ))
    .await;
    let yaml = format!(
        r#"
model_list:
  - model_name: cheap
    litellm_params:
      model: openai/gpt-4o-mini
      api_base: {}
      api_key: sk-upstream
general_settings:
  master_key: sk-master
"#,
        up.base()
    );
    let gw = gateway(&yaml).await;
    let key = new_key(&gw, json!({"models": ["cheap"]})).await;
    let bearer = format!("Bearer {key}");
    let fields = [("purpose", "batch"), ("target_model_names", "cheap")];
    // Large enough to be relayed as it arrives; the bad line far past the head.
    let mut models = vec!["cheap"; 400];
    models[350] = "o1-pro";
    let file = lines_naming(&models, "/v1/chat/completions", 2000);
    let a = upload(&gw, &bearer, &fields, file.as_bytes()).await;
    assert_eq!(a.status, 400, "{}", a.text());
    assert!(
        a.text()
            .contains(r#"line 351: body.model \"o1-pro\" is not the model group \"cheap\""#),
        "{}",
        a.text()
    );
    assert!(
        up.requests().is_empty(),
        "the upstream got no complete upload"
    );

    models[350] = "gpt-4o-mini";
    let file = lines_naming(&models, "/v1/chat/completions", 2000);
    let a = upload(&gw, &bearer, &fields, file.as_bytes()).await;
    assert_eq!(a.status, 200, "{}", a.text());
    let seen = up.requests();
    assert_eq!(seen.len(), 1);
    let sent = &seen[0];
    assert!(
        sent.headers.get("content-length").is_none(),
        "a rewritten file goes chunked"
    );
    let expected = form(
        &[("purpose", "batch")],
        file.replace(r#""model":"cheap""#, r#""model":"gpt-4o-mini""#)
            .as_bytes(),
    );
    assert!(
        sent.body[..] == expected[..],
        "the form with every line rewritten"
    );
}
