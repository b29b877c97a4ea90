//! Logging callbacks end to end, in process: a real HTTP receiver on loopback that refuses
//! deliveries for a while. Nothing is lost, records arrive in request order once it is back,
//! and the sink reports itself in `/health/readiness` and `/metrics` meanwhile.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use sluice_net::server::RequestBody;
use tokio::net::TcpListener;

use crate::common::*;

#[derive(Default)]
struct Receiver {
    down: AtomicBool,
    refused: AtomicU64,
    ids: Mutex<Vec<String>>,
}

async fn receiver() -> (String, Arc<Receiver>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let state = Arc::new(Receiver::default());
    let s = state.clone();
    let handler = move |req: Request<RequestBody>| {
        let s = s.clone();
        async move {
            let body = req.into_body().collect().await.unwrap().to_bytes();
            let mut resp = Response::new(Full::new(Bytes::new()));
            if s.down.load(Ordering::SeqCst) {
                s.refused.fetch_add(1, Ordering::SeqCst);
                *resp.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
                return resp;
            }
            let batch: Vec<serde_json::Value> = serde_json::from_slice(&body).unwrap();
            let mut ids = s.ids.lock().unwrap();
            ids.extend(
                batch
                    .iter()
                    .map(|r| r["request_id"].as_str().unwrap().to_owned()),
            );
            resp
        }
    };
    tokio::spawn(sluice_net::server::serve_with(
        listener,
        handler,
        std::future::pending::<()>(),
        Duration::ZERO,
    ));
    (format!("http://{addr}/hook"), state)
}

#[tokio::test]
async fn a_sink_that_is_down_loses_nothing_and_catches_up_in_order() {
    let (url, rx) = receiver().await;
    rx.down.store(true, Ordering::SeqCst);
    let gw = gateway(&format!(
        "model_list:\n  - model_name: m\n    litellm_params: {{model: mock/m}}\n\
         litellm_settings:\n  success_callback: [webhook]\n\
         callback_settings:\n  webhook: {{url: '{url}', batch_size: 3, flush_interval: 0.05}}\n"
    ))
    .await;
    let mut sent = Vec::new();
    for _ in 0..10 {
        let a = post(
            &gw.url("/v1/chat/completions"),
            r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#,
        )
        .await;
        assert_eq!(a.status, 200);
        sent.push(a.header("x-request-id").unwrap().to_owned());
    }
    // While down: refused deliveries, the records wait in the spill, the sink says so.
    let ready = gw.url("/health/readiness");
    let status = poll(
        PATIENCE,
        || async { get(&ready).await.json()["callbacks"][0].clone() },
        |hook| hook["spill_depth"].as_u64() == Some(10),
    )
    .await;
    assert_eq!(status["name"], "webhook");
    assert_eq!(status["up"], false, "{status}");
    assert_eq!(status["spill_depth"], 10, "{status}");
    assert!(rx.refused.load(Ordering::SeqCst) >= 1);
    let metrics = get(&gw.url("/metrics")).await.text();
    assert!(
        metrics.contains("sluice_callback_up{sink=\"webhook\"} 0"),
        "{metrics}"
    );
    assert!(rx.ids.lock().unwrap().is_empty());

    // Back up: every record arrives, oldest first, and the sink reports itself up.
    rx.down.store(false, Ordering::SeqCst);
    eventually(PATIENCE, || async {
        rx.ids.lock().unwrap().len() >= sent.len()
    })
    .await;
    assert_eq!(*rx.ids.lock().unwrap(), sent);
    // The receiver holds the last batch before its answer reaches the sink: wait for the sink
    // to take it off its spill.
    let ready = poll(
        PATIENCE,
        || async { get(&ready).await.json() },
        |r| r["callbacks"][0]["spill_depth"] == 0,
    )
    .await;
    assert_eq!(ready["callbacks"][0]["up"], true);
    assert_eq!(ready["callbacks"][0]["spill_depth"], 0);
    assert_eq!(ready["callbacks"][0]["delivered"], 10);
}

#[tokio::test]
async fn failures_go_only_to_failure_callbacks() {
    let (url, rx) = receiver().await;
    let mut gw = gateway(&format!(
        "model_list:\n  - model_name: m\n    litellm_params: {{model: mock/m}}\n\
         litellm_settings:\n  failure_callback: [webhook]\n\
         callback_settings:\n  webhook: {{url: '{url}', batch_size: 1, flush_interval: 0.01}}\n"
    ))
    .await;
    let ok = post(
        &gw.url("/v1/chat/completions"),
        r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#,
    )
    .await;
    // The success's record reaches the recorder, which feeds the callbacks in order, before
    // the failure is sent: had the success been delivered, it would arrive first.
    assert_eq!(gw.next_record().await.status, 200);
    let bad = post(
        &gw.url("/v1/chat/completions"),
        r#"{"model":"m","messages":[],"mock_fault":{"status":500}}"#,
    )
    .await;
    assert_eq!((ok.status.as_u16(), bad.status.as_u16()), (200, 500));
    eventually(PATIENCE, || async { !rx.ids.lock().unwrap().is_empty() }).await;
    assert_eq!(
        *rx.ids.lock().unwrap(),
        [bad.header("x-request-id").unwrap().to_owned()]
    );
}
