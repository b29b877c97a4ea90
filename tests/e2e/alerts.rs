//! Budget alerts end to end: a key's soft budget, 15% left and budget crossed each reach a
//! Slack-shaped receiver, a Teams-shaped one, a webhook and an SMTP server exactly once; and
//! with two instances on one PostgreSQL and one Redis, an alert goes out once for the fleet.
use sluice_net::server::RequestBody;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

use crate::common::*;

const MASTER: &str = "sk-master-alerts";

/// Wait out two and a half of the alert task's scans (`SCAN_EVERY`), so that an alert about to
/// go out a second time would have gone: wall time, because what is checked after it is an
/// absence, which no condition can be polled for.
async fn quiet_scans() {
    tokio::time::sleep(sluice::alerts::SCAN_EVERY * 5 / 2).await;
}

type Seen = Arc<Mutex<Vec<(String, Value)>>>;
/// Each message's recipients and text.
type Mail = Arc<Mutex<Vec<(Vec<String>, String)>>>;

/// An HTTP receiver: every POST's path and JSON body.
async fn receiver() -> (String, Seen) {
    let seen: Seen = Arc::default();
    let keep = seen.clone();
    let base = serve_loopback(move |req: Request<RequestBody>| {
        let keep = keep.clone();
        async move {
            let path = req.uri().path().to_owned();
            let body = req.into_body().collect().await.unwrap().to_bytes();
            let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
            keep.lock().unwrap().push((path, v));
            Response::new(Full::new(Bytes::from_static(b"ok")))
        }
    })
    .await;
    (base, seen)
}

/// A minimal SMTP server (no TLS, no auth): each message's recipients and text.
async fn smtp() -> (u16, Mail) {
    let mail: Mail = Arc::default();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let keep = mail.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let keep = keep.clone();
            tokio::spawn(async move {
                let (read, mut write) = stream.into_split();
                let mut lines = BufReader::new(read).lines();
                write.write_all(b"220 test ESMTP\r\n").await.unwrap();
                let (mut to, mut data, mut in_data) = (Vec::new(), String::new(), false);
                while let Ok(Some(line)) = lines.next_line().await {
                    if in_data {
                        if line == "." {
                            in_data = false;
                            keep.lock()
                                .unwrap()
                                .push((std::mem::take(&mut to), std::mem::take(&mut data)));
                            write.write_all(b"250 queued\r\n").await.unwrap();
                        } else {
                            data.push_str(&line);
                            data.push('\n');
                        }
                        continue;
                    }
                    let verb = line.get(..4).unwrap_or("").to_ascii_uppercase();
                    let answer: &[u8] = match verb.as_str() {
                        "EHLO" | "HELO" => b"250 test\r\n",
                        "RCPT" => {
                            to.push(line[8..].trim_matches(['<', '>', ' ']).to_owned());
                            b"250 ok\r\n"
                        }
                        "DATA" => {
                            in_data = true;
                            b"354 go on\r\n"
                        }
                        "QUIT" => {
                            let _ = write.write_all(b"221 bye\r\n").await;
                            return;
                        }
                        _ => b"250 ok\r\n",
                    };
                    write.write_all(answer).await.unwrap();
                }
            });
        }
    });
    (port, mail)
}

fn config(
    channels: &str,
    env: &str,
    database_url: Option<&str>,
    redis_url: Option<&str>,
) -> String {
    let (db, redis) = store_and_redis(database_url, redis_url);
    format!(
        "model_list:\n  - model_name: cheap\n    litellm_params:\n      model: mock/cheap\n      \
         input_cost_per_token: 0.000001\n      output_cost_per_token: 0.000002\n\
         general_settings:\n  master_key: {MASTER}\n  proxy_batch_write_at: 0.2\n  \
         alerting: [{channels}]\n{db}{redis}environment_variables:\n{env}"
    )
}

async fn admin(gw: &Gateway, path: &str, body: Value) -> Answer {
    let a = admin_as(gw, MASTER, "POST", path, body).await;
    assert_eq!(a.status, 200, "{path}: {}", a.text());
    a
}

async fn chat(gw: &Gateway, key: &str) -> Answer {
    chat_as(gw, key, "cheap", "", &[]).await
}

/// `field` of every body received at `path`, in order.
fn texts<'a>(all: &'a [(String, Value)], path: &str, field: &str) -> Vec<&'a str> {
    all.iter()
        .filter(|(p, _)| p == path)
        .map(|(_, v)| v[field].as_str().unwrap())
        .collect()
}

fn count(seen: &Seen, path: &str) -> usize {
    seen.lock()
        .unwrap()
        .iter()
        .filter(|(p, _)| p == path)
        .count()
}

#[tokio::test]
async fn each_budget_level_reaches_every_channel_once() {
    let (base, seen) = receiver().await;
    let (smtp_port, mail) = smtp().await;
    let env = format!(
        "  SLACK_WEBHOOK_URL: {base}/slack\n  MS_TEAMS_WEBHOOK_URL: {base}/teams\n  \
         WEBHOOK_URL: {base}/hook\n  SMTP_HOST: 127.0.0.1\n  SMTP_PORT: \"{smtp_port}\"\n  \
         SMTP_TLS: \"false\"\n  SMTP_SENDER_EMAIL: alerts@sluice.test\n"
    );
    let gw = gateway(&config("slack, ms_teams, webhook, email", &env, None, None)).await;
    let made = admin(
        &gw,
        "/key/generate",
        json!({"key_alias": "team-bot", "max_budget": 0.0001, "soft_budget": 0.00004,
               "metadata": {"soft_budget_alerting_emails": ["owner@example.com"]}}),
    )
    .await;
    let key = made.json()["key"].as_str().unwrap().to_owned();
    let quiet = admin(&gw, "/key/generate", json!({})).await;
    let quiet = quiet.json()["key"].as_str().unwrap().to_owned();
    assert_eq!(chat(&gw, &quiet).await.status, 200);

    // One request passes the soft budget (about 0.000047 USD).
    assert_eq!(chat(&gw, &key).await.status, 200);
    assert!(eventually(PATIENCE, || async { count(&seen, "/slack") == 1 }).await);
    // 10% left, then the budget reached.
    admin(&gw, "/key/update", json!({"key": key, "spend": 0.00009})).await;
    assert!(eventually(PATIENCE, || async { count(&seen, "/slack") == 2 }).await);
    admin(&gw, "/key/update", json!({"key": key, "spend": 0.0001})).await;
    assert!(eventually(PATIENCE, || async { count(&seen, "/slack") == 3 }).await);
    assert!(
        eventually(PATIENCE, || async {
            count(&seen, "/teams") == 3
                && count(&seen, "/hook") == 3
                && mail.lock().unwrap().len() == 3
        })
        .await,
        "teams {}, webhook {}, mail {}",
        count(&seen, "/teams"),
        count(&seen, "/hook"),
        mail.lock().unwrap().len()
    );
    // Nothing more: each level once.
    quiet_scans().await;
    let all = seen.lock().unwrap().clone();
    assert_eq!(all.len(), 9, "{all:?}");
    let events = texts(&all, "/hook", "event");
    assert_eq!(
        events,
        ["soft_budget_crossed", "threshold_crossed", "budget_crossed"]
    );
    let hook = &all.iter().find(|(p, _)| p == "/hook").unwrap().1;
    assert_eq!(hook["event_group"], "key");
    assert_eq!(hook["key_alias"], "team-bot");
    assert!(hook["spend"].as_f64().unwrap() > 0.00004, "{hook}");
    assert_eq!(hook["max_budget"], 0.0001);
    let slack = texts(&all, "/slack", "text");
    assert!(slack[0].contains("Soft budget crossed"), "{}", slack[0]);
    assert!(slack[1].contains("15% or less"), "{}", slack[1]);
    assert!(slack[2].contains("Budget crossed"), "{}", slack[2]);
    assert!(
        !slack.iter().any(|t| t.contains(&quiet)),
        "the key itself never appears"
    );
    let teams = &all.iter().find(|(p, _)| p == "/teams").unwrap().1;
    assert_eq!(
        teams["attachments"][0]["contentType"],
        "application/vnd.microsoft.card.adaptive"
    );
    let mail = mail.lock().unwrap();
    assert_eq!(mail[0].0, ["owner@example.com"]);
    assert!(mail[0].1.contains("Soft budget crossed"), "{}", mail[0].1);
}

/// A tag's soft budget (`/tag/new`) alerts once, as the tag's (`event_group` `tag`), whoever's
/// requests carried it.
#[tokio::test]
async fn a_tags_soft_budget_alerts_once() {
    let (base, seen) = receiver().await;
    let env = format!("  WEBHOOK_URL: {base}/hook\n");
    let gw = gateway(&config("webhook", &env, None, None)).await;
    admin(
        &gw,
        "/tag/new",
        json!({"name": "research", "max_budget": 1.0, "soft_budget": 0.00004}),
    )
    .await;
    for _ in 0..2 {
        let a = chat_as(&gw, MASTER, "cheap", r#","tags":["research"]"#, &[]).await;
        assert_eq!(a.status, 200, "{}", a.text());
    }
    assert!(eventually(PATIENCE, || async { count(&seen, "/hook") == 1 }).await);
    quiet_scans().await;
    let all = seen.lock().unwrap().clone();
    assert_eq!(all.len(), 1, "{all:?}");
    let hook = &all[0].1;
    assert_eq!(hook["event"], "soft_budget_crossed", "{hook}");
    assert_eq!(hook["event_group"], "tag", "{hook}");
    assert!(
        hook["event_message"]
            .as_str()
            .unwrap()
            .contains("*tag_id:* `research`"),
        "{hook}"
    );
}

#[tokio::test]
async fn channels_are_named_and_a_missing_variable_is_said() {
    let env = std::collections::HashMap::new();
    let yaml = config("slack", "  OTHER: x\n", None, None);
    let loaded = sluice_config::load_str(&yaml, &env).unwrap();
    let said = loaded
        .warnings
        .iter()
        .map(|w| w.to_string())
        .collect::<Vec<_>>();
    assert!(
        said.iter().any(|w| w.contains("SLACK_WEBHOOK_URL")),
        "{said:?}"
    );
    let yaml = config("pager", "  OTHER: x\n", None, None);
    let e = sluice_config::load_str(&yaml, &env)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("general_settings.alerting") && e.contains("pager"),
        "{e}"
    );
}

/// Two instances on one PostgreSQL and one Redis: both see the key's spend, one sends.
#[tokio::test]
async fn two_instances_send_an_alert_once() {
    let (Some(server), Some(redis)) = (postgres_server("SLUICE_TEST_POSTGRES_URL"), redis_server())
    else {
        return;
    };
    let db = postgres_database(&server).await;
    let (base, seen) = receiver().await;
    let env = format!("  SLACK_WEBHOOK_URL: {base}/slack\n");
    let cfg = config("slack", &env, Some(&db), Some(&redis));
    let a = gateway(&cfg).await;
    let b = gateway(&cfg).await;
    on_redis(&[&a, &b]).await;
    let made = admin(&a, "/key/generate", json!({"soft_budget": 0.00001})).await;
    let key = made.json()["key"].as_str().unwrap().to_owned();
    assert_eq!(chat(&a, &key).await.status, 200);
    // B learns the spend from the store; both then find the crossing.
    let entry = |gw: &Gateway| {
        gw.state
            .gate()
            .directory()
            .key(&sluice::auth::digest(&key))
            .map(|k| k.subject.counters.spent(sluice_core::limits::wall_ms()))
            .unwrap_or(0)
    };
    let _ = chat(&b, &key).await;
    assert!(eventually(PATIENCE, || async { entry(&b) > 0 && entry(&a) > 0 }).await);
    assert!(eventually(PATIENCE, || async { count(&seen, "/slack") >= 1 }).await);
    quiet_scans().await;
    assert_eq!(count(&seen, "/slack"), 1, "once for the fleet");
}

/// A deployment that fails goes into cooldown and comes back: one alert each, to Slack and the
/// webhook.
#[tokio::test]
async fn a_deployment_outage_and_its_recovery_are_alerted_once_each() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let (base, seen) = receiver().await;
    let failing = Arc::new(AtomicBool::new(true));
    let flag = failing.clone();
    let upstream = serve_loopback(move |_req: Request<RequestBody>| {
        let fail = flag.load(Ordering::Relaxed);
        async move {
            if fail {
                let mut r = Response::new(Full::new(Bytes::from_static(
                    br#"{"error":{"message":"down","type":"server_error"}}"#,
                )));
                *r.status_mut() = http::StatusCode::INTERNAL_SERVER_ERROR;
                return r;
            }
            Response::new(Full::new(Bytes::from_static(
                br#"{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}"#,
            )))
        }
    })
    .await;
    // A cooldown of 3 s, longer than the alert task's 1 s scan: with 1 s, a scan could fall
    // just after the cooldown ended and see none (the test failed about one run in five).
    let yaml = format!(
        "model_list:\n  - model_name: flaky\n    litellm_params:\n      model: openai/m\n      \
         api_base: {upstream}/v1\n      api_key: sk-up\n    model_info:\n      id: flaky-1\n\
         general_settings:\n  master_key: {MASTER}\n  alerting: [slack, webhook]\n  \
         alert_types: [outage_alerts]\nrouter_settings:\n  allowed_fails: 1\n  cooldown_time: 3\n  \
         num_retries: 0\nenvironment_variables:\n  SLACK_WEBHOOK_URL: {base}/slack\n  \
         WEBHOOK_URL: {base}/hook\n"
    );
    let gw = gateway(&yaml).await;
    for _ in 0..3 {
        let _ = chat_as(&gw, MASTER, "flaky", "", &[]).await;
    }
    assert!(
        eventually(PATIENCE, || async { count(&seen, "/slack") == 1 }).await,
        "the cooldown is alerted"
    );
    failing.store(false, std::sync::atomic::Ordering::Relaxed);
    let back = eventually(PATIENCE, || async {
        chat_as(&gw, MASTER, "flaky", "", &[]).await.status == 200
    })
    .await;
    assert!(back, "the deployment serves again");
    assert!(
        eventually(PATIENCE, || async { count(&seen, "/slack") == 2 }).await,
        "the recovery is alerted"
    );
    quiet_scans().await;
    let all = seen.lock().unwrap().clone();
    let events = texts(&all, "/hook", "event");
    assert_eq!(
        events,
        ["deployment_cooldown", "deployment_recovered"],
        "{all:?}"
    );
    let slack = texts(&all, "/slack", "text");
    assert!(
        slack[0].contains("cooling down") && slack[0].contains("flaky-1"),
        "{}",
        slack[0]
    );
    assert!(slack[1].contains("recovered"), "{}", slack[1]);
    assert!(
        !all.iter().any(|(_, v)| v.to_string().contains("sk-up")),
        "no key in an alert"
    );
}

/// Spend and deployment reports (`spend_reports`, `daily_reports`): after a window with spend,
/// one spend report with the team, tag, model and key, and one deployment report, each once
/// per window; a window with no spend sends no spend report.
#[tokio::test]
async fn spend_and_deployment_reports_go_out_once_per_window() {
    let (base, seen) = receiver().await;
    let env = format!("  SLACK_WEBHOOK_URL: {base}/slack\n  WEBHOOK_URL: {base}/hook\n");
    let cfg = format!(
        "model_list:\n  - model_name: cheap\n    litellm_params:\n      model: mock/cheap\n      \
         input_cost_per_token: 0.000001\n      output_cost_per_token: 0.000002\n\
         general_settings:\n  master_key: {MASTER}\n  proxy_batch_write_at: 0.1\n  \
         alerting: [slack, webhook]\n  alert_types: [spend_reports, daily_reports]\n  \
         spend_report_frequency: 3s\n  alerting_args:\n    daily_report_frequency: 3\n\
         environment_variables:\n{env}"
    );
    let gw = gateway(&cfg).await;
    admin(
        &gw,
        "/team/new",
        json!({"team_id": "t-rep", "team_alias": "Reporting"}),
    )
    .await;
    let made = admin(
        &gw,
        "/key/generate",
        json!({"team_id": "t-rep", "key_alias": "report-key", "metadata": {"tags": ["proj-x"]}}),
    )
    .await;
    let key = made.json()["key"].as_str().unwrap().to_owned();
    // Just after a window starts, so that the three requests fall in one window and are
    // written long before it ends (wall time: the report windows are aligned to the epoch).
    let into = sluice_core::limits::wall_ms() % 3_000;
    tokio::time::sleep(Duration::from_millis(3_100 - into)).await;
    for _ in 0..3 {
        assert_eq!(chat(&gw, &key).await.status, 200);
    }
    let reported = eventually(PATIENCE, || async {
        let all = seen.lock().unwrap().clone();
        texts(&all, "/slack", "text")
            .iter()
            .any(|t| t.contains("Spend Report"))
            && texts(&all, "/slack", "text")
                .iter()
                .any(|t| t.contains("Deployment report"))
    })
    .await;
    let all = seen.lock().unwrap().clone();
    assert!(reported, "{all:#?}");
    let spend: Vec<_> = texts(&all, "/slack", "text")
        .into_iter()
        .filter(|t| t.contains("Spend Report"))
        .collect();
    let text = spend[0];
    for part in [
        "Team: `Reporting`",
        "Tag: `proj-x`",
        "Model: `cheap`",
        "Key: `report-key`",
        "over 3 requests",
    ] {
        assert!(text.contains(part), "{part} in {text}");
    }
    let hook: Vec<_> = all
        .iter()
        .filter(|(p, v)| p == "/hook" && v["event"] == "spend_report")
        .collect();
    assert_eq!(hook.len(), spend.len(), "the webhook gets each report too");
    // No more spend: the windows that follow send no spend report (wall time: two more 3 s
    // windows must end, and an absence cannot be polled for).
    tokio::time::sleep(Duration::from_secs(7)).await;
    let later = seen.lock().unwrap().clone();
    let spend_after = texts(&later, "/slack", "text")
        .into_iter()
        .filter(|t| t.contains("Spend Report"))
        .count();
    assert_eq!(
        spend_after,
        spend.len(),
        "one spend report for the one window with spend"
    );
}
