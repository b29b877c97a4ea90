//! The Realtime API proxy end to end: a WebSocket client → sluice → `sluice mock` over
//! loopback. The session opens with the mock's `session.created`, a response's usage is
//! charged to the key and written to the spend log, the client closing closes the upstream
//! (the session is recorded once), and refusals (no access, unknown model, a provider without
//! a Realtime API) are ordinary HTTP answers before any upgrade.
use std::time::Duration;

use crate::common::*;
use futures_util::{SinkExt, StreamExt};
use serde_json::{json, Value};
use sluice_core::record::Outcome;
use sluice_mock::{MockSettings, REALTIME_CACHED_TOKENS, REALTIME_INPUT_TOKENS};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};

const MASTER: &str = "sk-master";
const UPSTREAM_KEY: &str = "sk-upstream-secret";
const OUTPUT_TOKENS: u32 = 7;

fn config(up: &str) -> String {
    format!(
        r#"
model_list:
  - model_name: rt
    litellm_params:
      model: openai/gpt-4o-realtime-preview
      api_base: http://{up}/v1
      api_key: {UPSTREAM_KEY}
      input_cost_per_token: 0.000001
      output_cost_per_token: 0.000002
  - model_name: rt-azure
    litellm_params:
      model: azure/my-realtime
      api_base: http://{up}
      api_key: {UPSTREAM_KEY}
      api_version: 2024-10-01-preview
  - model_name: claude
    litellm_params:
      model: anthropic/claude-sonnet-4-5
      api_base: http://{up}
      api_key: {UPSTREAM_KEY}
general_settings:
  master_key: {MASTER}
"#
    )
}

async fn setup() -> (MockServer, Gateway) {
    let mock = mock_server(MockSettings {
        api_key: Some(UPSTREAM_KEY.to_owned()),
        response_tokens: OUTPUT_TOKENS,
        chunks: 3,
        ..MockSettings::default()
    })
    .await;
    let gw = gateway(&config(&mock.addr.to_string())).await;
    (mock, gw)
}

type Client =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Open a session on `path` with `headers`; the HTTP refusal (status, body) when refused.
async fn open(gw: &Gateway, path: &str, headers: &[(&str, &str)]) -> Result<Client, (u16, Value)> {
    let url = format!("ws://{}{}", gw.addr, path);
    let mut req = url.into_client_request().unwrap();
    for (k, v) in headers {
        req.headers_mut().insert(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    match tokio_tungstenite::connect_async(req).await {
        Ok((ws, resp)) => {
            assert_eq!(resp.status(), 101);
            Ok(ws)
        }
        Err(WsError::Http(resp)) => {
            let status = resp.status().as_u16();
            let body = resp.into_body().unwrap_or_default();
            Err((status, serde_json::from_slice(&body).unwrap_or(Value::Null)))
        }
        Err(e) => panic!("connect failed: {e}"),
    }
}

/// The next text event, as JSON.
async fn next_event(ws: &mut Client) -> Value {
    loop {
        let msg = tokio::time::timeout(Duration::from_secs(5), ws.next())
            .await
            .expect("an event within 5 s")
            .expect("the session is open")
            .expect("a frame");
        if let Message::Text(t) = msg {
            return serde_json::from_str(t.as_str()).unwrap();
        }
    }
}

#[tokio::test]
async fn a_session_is_relayed_charged_and_closed() {
    let (_mock, mut gw) = setup().await;
    let key = new_key(&gw, json!({"models": ["rt"]})).await;
    assert_eq!(gw.next_record().await.route, "admin", "the key's creation");
    let bearer = format!("Bearer {key}");
    let mut ws = open(
        &gw,
        "/v1/realtime?model=rt",
        &[
            ("authorization", bearer.as_str()),
            ("openai-beta", "realtime=v1"),
        ],
    )
    .await
    .expect("upgraded");
    let created = next_event(&mut ws).await;
    assert_eq!(created["type"], "session.created");
    assert_eq!(created["session"]["model"], "gpt-4o-realtime-preview");
    ws.send(Message::text(
        json!({"type": "session.update", "session": {"modalities": ["text"]}}).to_string(),
    ))
    .await
    .unwrap();
    assert_eq!(next_event(&mut ws).await["type"], "session.updated");
    // A ping is answered through the relay.
    ws.send(Message::Ping(b"hi".to_vec().into())).await.unwrap();
    // Two responses: text deltas, then `response.done` with usage.
    let mut deltas = 0;
    let mut done = 0;
    ws.send(Message::text(r#"{"type":"response.create"}"#))
        .await
        .unwrap();
    ws.send(Message::text(r#"{"type":"response.create"}"#))
        .await
        .unwrap();
    while done < 2 {
        let e = next_event(&mut ws).await;
        match e["type"].as_str().unwrap() {
            "response.output_text.delta" => deltas += 1,
            "response.done" => {
                done += 1;
                assert_eq!(e["response"]["usage"]["output_tokens"], OUTPUT_TOKENS);
            }
            _ => {}
        }
    }
    assert_eq!(deltas, 6);
    // The client closes with a code; the close comes back through the relay.
    ws.send(Message::Close(Some(CloseFrame {
        code: CloseCode::Normal,
        reason: "bye".into(),
    })))
    .await
    .unwrap();
    let mut closed_by_peer = false;
    while let Ok(Some(m)) = tokio::time::timeout(Duration::from_secs(5), ws.next()).await {
        match m {
            Ok(Message::Close(f)) => {
                closed_by_peer = true;
                if let Some(f) = f {
                    assert_eq!(f.code, CloseCode::Normal);
                }
            }
            Ok(_) => {}
            Err(_) => break,
        }
    }
    assert!(closed_by_peer, "the close was answered");
    // One record for the session, with both responses' usage and their cost.
    let r = gw.next_record().await;
    assert_eq!(r.route, "/v1/realtime");
    assert_eq!(r.status, 101);
    assert_eq!(r.outcome, Outcome::StreamComplete);
    assert_eq!(r.model.as_deref(), Some("rt"));
    assert_eq!(r.provider, Some("openai"));
    let u = r.usage.expect("usage");
    assert_eq!(u.prompt_tokens, 2 * REALTIME_INPUT_TOKENS);
    assert_eq!(u.completion_tokens, 2 * u64::from(OUTPUT_TOKENS));
    assert_eq!(u.cached_tokens, 2 * REALTIME_CACHED_TOKENS);
    assert!(r.cost.unwrap() > 0, "the session was priced");
    // The key's spend log holds the session.
    let logs_ok = eventually(PATIENCE, || async {
        let logs = send(
            "GET",
            &gw.url(&format!("/spend/logs?api_key={key}")),
            "",
            &[("authorization", "Bearer sk-master")],
        )
        .await;
        logs.json().as_array().is_some_and(|rows| {
            rows.iter().any(|l| {
                l["model_group"] == "rt"
                    && l["total_tokens"].as_u64()
                        == Some(2 * (REALTIME_INPUT_TOKENS + u64::from(OUTPUT_TOKENS)))
                    && l["spend"].as_f64().unwrap_or(0.0) > 0.0
            })
        })
    })
    .await;
    assert!(logs_ok, "the session is in the spend log");
}

#[tokio::test]
async fn browsers_authenticate_by_subprotocol_and_azure_is_reached() {
    let (_mock, mut gw) = setup().await;
    let protocols = format!("realtime, openai-insecure-api-key.{MASTER}, openai-beta.realtime-v1");
    let mut ws = open(
        &gw,
        "/realtime?model=rt-azure",
        &[("sec-websocket-protocol", protocols.as_str())],
    )
    .await
    .expect("upgraded");
    let created = next_event(&mut ws).await;
    assert_eq!(created["type"], "session.created");
    assert_eq!(created["session"]["model"], "my-realtime");
    // The client going away (no close handshake) ends the session too.
    drop(ws);
    let r = gw.next_record().await;
    assert_eq!(r.provider, Some("azure"));
    assert!(r.usage.is_none());
}

#[tokio::test]
async fn refusals_come_before_the_upgrade() {
    let (_mock, mut gw) = setup().await;
    let other = new_key(&gw, json!({"models": ["claude"]})).await;
    let bearer = format!("Bearer {other}");
    let (status, body) = open(
        &gw,
        "/v1/realtime?model=rt",
        &[("authorization", bearer.as_str())],
    )
    .await
    .expect_err("refused");
    assert_eq!(status, 401, "{body}");
    gw.next_record().await;
    let master = format!("Bearer {MASTER}");
    let (status, _) = open(
        &gw,
        "/v1/realtime?model=nope",
        &[("authorization", master.as_str())],
    )
    .await
    .expect_err("refused");
    assert_eq!(status, 404);
    gw.next_record().await;
    let (status, _) = open(&gw, "/v1/realtime?model=rt", &[])
        .await
        .expect_err("refused");
    assert_eq!(status, 401);
    gw.next_record().await;
    let (status, body) = open(
        &gw,
        "/v1/realtime?model=claude",
        &[("authorization", master.as_str())],
    )
    .await
    .expect_err("refused");
    assert_eq!(status, 501, "{body}");
    let msg = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        msg.contains("anthropic") && msg.contains("/v1/realtime"),
        "{msg}"
    );
    // A plain GET is not an upgrade.
    let a = send(
        "GET",
        &gw.url("/v1/realtime?model=rt"),
        "",
        &[("authorization", master.as_str())],
    )
    .await;
    assert_eq!(a.status, 400, "{}", a.text());
}
