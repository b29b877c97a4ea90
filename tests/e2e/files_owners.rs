//! End-to-end: files and batches belong to the key that created them. Two teams with a key
//! each (made through the management API): key B cannot list, retrieve, read, delete or batch
//! key A's file, nor retrieve or cancel A's batch; forged ids (an altered MAC, another
//! creator re-encoded, no creator) are 404s; lists page through a key's own objects; a
//! completed batch is charged once to its creator whoever retrieves it; the master key sees
//! everything. And a fleet: two gateways on one PostgreSQL agree on owners and charge once.

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde_json::{json, Value};
use sluice::files::ids::{self, Kind};
use sluice_mock::MockSettings;
use sluice_store::KeyHash;

use crate::common::*;
use crate::files::{config, id_key, upload};

/// A key in a new team `team`; (the key, its hash).
async fn team_key(gw: &Gateway, team: &str) -> (String, String) {
    let made = admin_as(
        gw,
        "sk-master",
        "POST",
        "/team/new",
        json!({"team_id": team}),
    )
    .await;
    assert_eq!(made.status, 200, "{}", made.text());
    let key = new_key(gw, json!({"team_id": team, "max_budget": 100})).await;
    let hash = KeyHash::of(&key).as_str().to_owned();
    (key, hash)
}

/// A call with `key` as the bearer key (the management API's helper, any key).
async fn call(gw: &Gateway, method: &str, path: &str, key: &str, body: Value) -> Answer {
    admin_as(gw, key, method, path, body).await
}

async fn upload_as(gw: &Gateway, key: &str, content: &[u8]) -> String {
    let up = upload(
        gw,
        &format!("Bearer {key}"),
        &[("purpose", "batch"), ("target_model_names", "gpt-batch")],
        content,
    )
    .await;
    assert_eq!(up.status, 200, "{}", up.text());
    up.json()["id"].as_str().unwrap().to_owned()
}

async fn create_batch(gw: &Gateway, key: &str, input: &str) -> Answer {
    call(
        gw,
        "POST",
        "/v1/batches",
        key,
        json!({"input_file_id": input, "endpoint": "/v1/chat/completions", "completion_window": "24h"}),
    )
    .await
}

/// Batch input: `n` chat requests.
fn batch_lines(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "{}\n",
                json!({"custom_id": format!("r{i}"), "method": "POST", "url": "/v1/chat/completions",
                       "body": {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hello there"}]}})
            )
        })
        .collect()
}

/// The ids of a list answer.
fn listed(a: &Answer) -> Vec<String> {
    assert_eq!(a.status, 200, "{}", a.text());
    a.json()["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap().to_owned())
        .collect()
}

/// The base64 payload of a sluice id (text, then the MAC), and the id made of another payload.
fn payload(kind: Kind, id: &str) -> Vec<u8> {
    let prefix = match kind {
        Kind::File => "file-sluice-",
        Kind::Batch => "batch_sluice-",
        Kind::Video => "video_sluice-",
        Kind::VectorStore => "vs_sluice-",
    };
    URL_SAFE_NO_PAD
        .decode(id.strip_prefix(prefix).unwrap())
        .unwrap()
}
fn with_payload(kind: Kind, raw: &[u8]) -> String {
    let prefix = match kind {
        Kind::File => "file-sluice-",
        Kind::Batch => "batch_sluice-",
        Kind::Video => "video_sluice-",
        Kind::VectorStore => "vs_sluice-",
    };
    format!("{prefix}{}", URL_SAFE_NO_PAD.encode(raw))
}

/// Ids a client could make from `id` (of its own or another's object) without the master key:
/// the MAC altered, the creator replaced by `creator` (MAC kept, or dropped as in sluice's old
/// unsigned ids), no creator at all.
fn forgeries(kind: Kind, id: &str, creator: &str) -> Vec<String> {
    let raw = payload(kind, id);
    let (text, tag) = raw.split_at(raw.len() - 16);
    let text = std::str::from_utf8(text).unwrap();
    let fields: Vec<&str> = text.splitn(3, '\n').collect();
    let mut altered = raw.clone();
    *altered.last_mut().unwrap() ^= 1;
    let as_creator = format!("{}\n{creator}\n{}", fields[0], fields[2]);
    let creatorless = format!("{}\n\n{}", fields[0], fields[2]);
    let mut signed_as = as_creator.clone().into_bytes();
    signed_as.extend_from_slice(tag);
    let mut signed_none = creatorless.clone().into_bytes();
    signed_none.extend_from_slice(tag);
    vec![
        with_payload(kind, &altered),
        with_payload(kind, &signed_as),
        with_payload(kind, as_creator.as_bytes()),
        with_payload(kind, &signed_none),
        with_payload(kind, creatorless.as_bytes()),
    ]
}

#[tokio::test]
async fn a_key_sees_only_its_own_files_and_batches() {
    let mock = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(&mock.base())).await;
    let (a, a_hash) = team_key(&gw, "owners-team-a").await;
    let (b, b_hash) = team_key(&gw, "owners-team-b").await;

    let file = upload_as(&gw, &a, batch_lines(2).as_bytes()).await;
    let held = ids::decode(&id_key(), Kind::File, &file).unwrap();
    assert_eq!(held.creator.as_deref(), Some(a_hash.as_str()));
    let b_file = upload_as(&gw, &b, batch_lines(1).as_bytes()).await;

    // B: every call on A's file is a 404, like a file that does not exist.
    let not_found = |a: &Answer, what: &str| {
        assert_eq!(a.status, 404, "{what}: {}", a.text());
        assert_eq!(a.json()["error"]["type"], "invalid_request_error", "{what}");
    };
    for (method, path) in [
        ("GET", format!("/v1/files/{file}")),
        ("GET", format!("/v1/files/{file}/content")),
        ("DELETE", format!("/v1/files/{file}")),
    ] {
        not_found(&call(&gw, method, &path, &b, Value::Null).await, &path);
    }
    not_found(&create_batch(&gw, &b, &file).await, "a batch of A's file");
    let b_list = listed(
        &call(
            &gw,
            "GET",
            "/v1/files?target_model_names=gpt-batch",
            &b,
            Value::Null,
        )
        .await,
    );
    assert!(b_list.contains(&b_file), "{b_list:?}");
    for id in &b_list {
        let d = ids::decode(&id_key(), Kind::File, id).unwrap();
        assert_eq!(
            d.creator.as_deref(),
            Some(b_hash.as_str()),
            "B lists only its own"
        );
    }
    // A's own calls work, and its file survived B's delete.
    let got = call(&gw, "GET", &format!("/v1/files/{file}"), &a, Value::Null).await;
    assert_eq!(got.status, 200, "{}", got.text());
    assert_eq!(got.json()["id"], file.as_str());
    let a_list = listed(
        &call(
            &gw,
            "GET",
            "/v1/files?target_model_names=gpt-batch",
            &a,
            Value::Null,
        )
        .await,
    );
    assert!(
        a_list.contains(&file) && !a_list.contains(&b_file),
        "{a_list:?}"
    );

    // A's batch: not B's to retrieve or cancel, nor to list.
    let made = create_batch(&gw, &a, &file).await;
    assert_eq!(made.status, 200, "{}", made.text());
    let batch = made.json()["id"].as_str().unwrap().to_owned();
    assert_eq!(made.json()["input_file_id"], file.as_str());
    not_found(
        &call(&gw, "GET", &format!("/v1/batches/{batch}"), &b, Value::Null).await,
        "B retrieves",
    );
    not_found(
        &call(
            &gw,
            "POST",
            &format!("/v1/batches/{batch}/cancel"),
            &b,
            Value::Null,
        )
        .await,
        "B cancels",
    );
    let b_batches = listed(
        &call(
            &gw,
            "GET",
            "/v1/batches?target_model_names=gpt-batch",
            &b,
            Value::Null,
        )
        .await,
    );
    assert!(!b_batches.contains(&batch), "{b_batches:?}");
    let a_batches = listed(
        &call(
            &gw,
            "GET",
            "/v1/batches?target_model_names=gpt-batch",
            &a,
            Value::Null,
        )
        .await,
    );
    assert!(a_batches.contains(&batch), "{a_batches:?}");

    // A's video and vector store (of A's file): not B's to see, nor to search or add to.
    let made = call(
        &gw,
        "POST",
        "/v1/videos",
        &a,
        json!({"model": "gpt-batch", "prompt": "a cat"}),
    )
    .await;
    assert_eq!(made.status, 200, "{}", made.text());
    let video = made.json()["id"].as_str().unwrap().to_owned();
    let made = call(
        &gw,
        "POST",
        "/v1/vector_stores",
        &a,
        json!({"name": "kb", "file_ids": [file]}),
    )
    .await;
    assert_eq!(made.status, 200, "{}", made.text());
    let store = made.json()["id"].as_str().unwrap().to_owned();
    for (method, path, body) in [
        ("GET", format!("/v1/videos/{video}"), Value::Null),
        ("GET", format!("/v1/videos/{video}/content"), Value::Null),
        ("DELETE", format!("/v1/videos/{video}"), Value::Null),
        ("GET", format!("/v1/vector_stores/{store}"), Value::Null),
        (
            "POST",
            format!("/v1/vector_stores/{store}/search"),
            json!({"query": "x"}),
        ),
        (
            "POST",
            format!("/v1/vector_stores/{store}/files"),
            json!({"file_id": b_file}),
        ),
        ("DELETE", format!("/v1/vector_stores/{store}"), Value::Null),
    ] {
        not_found(&call(&gw, method, &path, &b, body).await, &path);
    }
    // Nor may A put B's file in its own store.
    not_found(
        &call(
            &gw,
            "POST",
            &format!("/v1/vector_stores/{store}/files"),
            &a,
            json!({"file_id": b_file}),
        )
        .await,
        "B's file in A's store",
    );
    let got = call(
        &gw,
        "GET",
        &format!("/v1/vector_stores/{store}"),
        &a,
        Value::Null,
    )
    .await;
    assert_eq!(got.status, 200, "{}", got.text());

    // Forged ids: not found, for B and for A alike (the MAC decides, not the text).
    for (kind, id) in [
        (Kind::File, &file),
        (Kind::Batch, &batch),
        (Kind::Video, &video),
        (Kind::VectorStore, &store),
    ] {
        for forged in forgeries(kind, id, &b_hash) {
            let path = match kind {
                Kind::File => format!("/v1/files/{forged}"),
                Kind::Batch => format!("/v1/batches/{forged}"),
                Kind::Video => format!("/v1/videos/{forged}"),
                Kind::VectorStore => format!("/v1/vector_stores/{forged}"),
            };
            for key in [&a, &b] {
                not_found(&call(&gw, "GET", &path, key, Value::Null).await, &forged);
            }
        }
    }
    // A creator-less id, correctly signed (what the master key's lists show for an object
    // made without sluice): the master key's only.
    let creatorless = ids::encode(
        &id_key(),
        Kind::File,
        &held.deployment,
        None,
        &held.upstream,
    );
    not_found(
        &call(
            &gw,
            "GET",
            &format!("/v1/files/{creatorless}"),
            &a,
            Value::Null,
        )
        .await,
        "creator-less",
    );
    let master_got = send(
        "GET",
        &gw.url(&format!("/v1/files/{creatorless}")),
        "",
        &[MASTER],
    )
    .await;
    assert_eq!(master_got.status, 200, "{}", master_got.text());

    // The master key lists every file, with the ids their owners were given.
    let all = listed(
        &send(
            "GET",
            &gw.url("/v1/files?target_model_names=gpt-batch"),
            "",
            &[MASTER],
        )
        .await,
    );
    assert!(all.contains(&file) && all.contains(&b_file), "{all:?}");
    let all_batches = listed(
        &send(
            "GET",
            &gw.url("/v1/batches?target_model_names=gpt-batch"),
            "",
            &[MASTER],
        )
        .await,
    );
    assert!(all_batches.contains(&batch), "{all_batches:?}");

    // A deletes its own file: gone for A too, and from its list.
    let gone = call(&gw, "DELETE", &format!("/v1/files/{file}"), &a, Value::Null).await;
    assert_eq!(gone.status, 200, "{}", gone.text());
    not_found(
        &call(&gw, "GET", &format!("/v1/files/{file}"), &a, Value::Null).await,
        "deleted",
    );
}

#[tokio::test]
async fn lists_page_through_a_keys_own_files() {
    let mock = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(&mock.base())).await;
    let (a, _) = team_key(&gw, "pages-team-a").await;
    let (b, _) = team_key(&gw, "pages-team-b").await;
    let mut mine = Vec::new();
    for i in 0..4 {
        mine.push(upload_as(&gw, &a, batch_lines(i + 1).as_bytes()).await);
        upload_as(&gw, &b, batch_lines(i + 1).as_bytes()).await;
    }
    // Newest first, two at a time, each page only A's, `after` the last one shown.
    let first = call(
        &gw,
        "GET",
        "/v1/files?target_model_names=gpt-batch&limit=2",
        &a,
        Value::Null,
    )
    .await;
    let page = first.json();
    assert_eq!(listed(&first), [mine[3].clone(), mine[2].clone()]);
    assert_eq!(page["has_more"], true);
    assert_eq!(page["first_id"], mine[3].as_str());
    assert_eq!(page["last_id"], mine[2].as_str());
    let next = call(
        &gw,
        "GET",
        &format!(
            "/v1/files?target_model_names=gpt-batch&limit=2&after={}",
            mine[2]
        ),
        &a,
        Value::Null,
    )
    .await;
    assert_eq!(listed(&next), [mine[1].clone(), mine[0].clone()]);
    // A cursor that is not a sluice id of this list is refused, not passed on.
    let bad = call(
        &gw,
        "GET",
        "/v1/files?target_model_names=gpt-batch&after=file-abc",
        &a,
        Value::Null,
    )
    .await;
    assert_eq!(bad.status, 400, "{}", bad.text());
}

#[tokio::test]
async fn a_batch_is_charged_once_to_its_creator_whoever_retrieves_it() {
    let mock = mock_server(MockSettings::default()).await;
    let gw = gateway(&config(&mock.base())).await;
    let (a, a_hash) = team_key(&gw, "charge-team-a").await;
    let (b, _) = team_key(&gw, "charge-team-b").await;
    let file = upload_as(&gw, &a, batch_lines(3).as_bytes()).await;
    let made = create_batch(&gw, &a, &file).await;
    assert_eq!(made.status, 200, "{}", made.text());
    let batch = made.json()["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/batches/{batch}");

    // Completed on A's first retrieve; retrieved again by A, by the master key, by A.
    let done = call(&gw, "GET", &path, &a, Value::Null).await;
    assert_eq!(done.json()["status"], "completed", "{}", done.text());
    let usage = done.json()["usage"].clone();
    let (input, output) = (
        usage["input_tokens"].as_u64().unwrap(),
        usage["output_tokens"].as_u64().unwrap(),
    );
    // The output file is A's too, and not B's.
    let out = done.json()["output_file_id"].as_str().unwrap().to_owned();
    let content = call(
        &gw,
        "GET",
        &format!("/v1/files/{out}/content"),
        &a,
        Value::Null,
    )
    .await;
    assert_eq!(content.status, 200);
    let stolen = call(
        &gw,
        "GET",
        &format!("/v1/files/{out}/content"),
        &b,
        Value::Null,
    )
    .await;
    assert_eq!(stolen.status, 404);
    let spend = |x: &Answer| {
        x.header("x-sluice-key-spend")
            .unwrap()
            .parse::<f64>()
            .unwrap()
    };
    let again = call(&gw, "GET", &path, &a, Value::Null).await;
    let by_master = send("GET", &gw.url(&path), "", &[MASTER]).await;
    assert_eq!(by_master.status, 200, "{}", by_master.text());
    assert_eq!(
        by_master.json()["id"],
        batch.as_str(),
        "the owner's id, for the master too"
    );
    let last = call(&gw, "GET", &path, &a, Value::Null).await;
    let expected = (input as f64 * 0.15e-6 + output as f64 * 0.6e-6) / 2.0;
    assert!(
        (spend(&again) - expected).abs() < 1e-9,
        "{} vs {expected}",
        spend(&again)
    );
    assert_eq!(spend(&again), spend(&last), "charged once");
    let b_spend = call(
        &gw,
        "GET",
        "/v1/batches?target_model_names=gpt-batch",
        &b,
        Value::Null,
    )
    .await;
    assert_eq!(spend(&b_spend), 0.0);

    // One spend row, on A.
    let held = ids::decode(&id_key(), Kind::Batch, &batch).unwrap();
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
    written_so_far(&gw, &gw).await;
    let logged = rows().await;
    assert_eq!(logged.len(), 1, "{logged:?}");
    assert_eq!(logged[0]["api_key"], a_hash.as_str());
}

/// Wait until every spend record `gw` made so far is written: a chat sent now reaches the
/// store after them (one writer, in order), so once its row is listed (by `logs`, which may
/// be another instance on the same store), a second charge made before it would be too. An
/// absence (no second row) is then checked without waiting for a fixed time.
async fn written_so_far(gw: &Gateway, logs: &Gateway) {
    let marker = post(
        &gw.url("/v1/chat/completions"),
        r#"{"model":"gpt-batch","messages":[{"role":"user","content":"marker"}]}"#,
    )
    .await;
    assert_eq!(marker.status, 200, "{}", marker.text());
    let id = marker.header("x-request-id").unwrap().to_owned();
    let url = logs.url(&format!("/spend/logs?request_id={id}"));
    let listed = eventually(PATIENCE, || async {
        get(&url)
            .await
            .json()
            .as_array()
            .is_some_and(|r| !r.is_empty())
    })
    .await;
    assert!(listed, "the marker request's spend row");
}

fn fleet_config(mock_base: &str, db: &str) -> String {
    format!("{}  database_url: {db}\n", config(mock_base))
}

#[tokio::test]
async fn a_fleet_agrees_on_owners_and_charges_once() {
    let Some(server) = postgres_server("SLUICE_TEST_POSTGRES_URL") else {
        return;
    };
    let db = postgres_database(&server).await;
    let mock = mock_server(MockSettings::default()).await;
    let yaml = fleet_config(&mock.base(), &db);
    let one = gateway(&yaml).await;
    let two = gateway(&yaml).await;
    let (a, _) = team_key(&one, "fleet-team-a").await;
    let (b, _) = team_key(&one, "fleet-team-b").await;

    let file = upload_as(&one, &a, batch_lines(2).as_bytes()).await;
    // On the other instance: the owner reads it and lists it, another key does not.
    let file_path = format!("/v1/files/{file}");
    let read = || call(&two, "GET", &file_path, &a, Value::Null);
    assert!(eventually(PATIENCE, || async { read().await.status == 200 }).await);
    let theirs = call(&two, "GET", &format!("/v1/files/{file}"), &b, Value::Null).await;
    assert_eq!(theirs.status, 404, "{}", theirs.text());
    let listed_two = listed(
        &call(
            &two,
            "GET",
            "/v1/files?target_model_names=gpt-batch",
            &a,
            Value::Null,
        )
        .await,
    );
    assert!(listed_two.contains(&file), "{listed_two:?}");
    let b_two = listed(
        &call(
            &two,
            "GET",
            "/v1/files?target_model_names=gpt-batch",
            &b,
            Value::Null,
        )
        .await,
    );
    assert!(!b_two.contains(&file), "{b_two:?}");

    // A batch made on one, completed while both retrieve it at once, and retrieved on both
    // again (once more by the master key): one charge.
    let made = create_batch(&one, &a, &file).await;
    assert_eq!(made.status, 200, "{}", made.text());
    let batch = made.json()["id"].as_str().unwrap().to_owned();
    let path = format!("/v1/batches/{batch}");
    for _ in 0..2 {
        let (x, y) = tokio::join!(
            call(&one, "GET", &path, &a, Value::Null),
            call(&two, "GET", &path, &a, Value::Null)
        );
        assert_eq!((x.status.as_u16(), y.status.as_u16()), (200, 200));
    }
    let by_master = send("GET", &two.url(&path), "", &[MASTER]).await;
    assert_eq!(
        by_master.json()["status"],
        "completed",
        "{}",
        by_master.text()
    );
    let held = ids::decode(&id_key(), Kind::Batch, &batch).unwrap();
    let row_id = ids::encode(
        &id_key(),
        Kind::Batch,
        &held.deployment,
        None,
        &held.upstream,
    );
    let url = one.url(&format!("/spend/logs?request_id={row_id}"));
    let rows = || async {
        send("GET", &url, "", &[MASTER])
            .await
            .json()
            .as_array()
            .cloned()
            .unwrap_or_default()
    };
    assert!(eventually(PATIENCE, || async { !rows().await.is_empty() }).await);
    written_so_far(&one, &one).await;
    written_so_far(&two, &one).await;
    assert_eq!(rows().await.len(), 1, "charged once by the fleet");
}
