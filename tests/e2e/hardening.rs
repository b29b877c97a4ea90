//! Hostile clients and overload (issue 20): every limit answers with its status (and an
//! OpenAI-shaped error where HTTP allows a body), and the gateway keeps serving meanwhile.
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::common::*;
use sluice_mock::MockSettings;

fn config(general: &str) -> String {
    format!(
        "model_list:\n  - model_name: m\n    litellm_params: {{model: mock/m}}\n\
         general_settings:\n{general}"
    )
}

/// A config whose model answers after `latency` (a `sluice mock` server).
fn slow_config(mock: &MockServer, general: &str) -> String {
    format!(
        "model_list:\n  - model_name: slow\n    litellm_params: {{model: openai/x, api_base: '{}', api_key: k}}\n\
         general_settings:\n{general}",
        mock.base()
    )
}

const CHAT: &str = r#"{"model":"m","messages":[{"role":"user","content":"hi"}]}"#;

/// Write `head` (and `body`) on a fresh connection; the whole answer as text ("" if the
/// connection was closed without one), waiting at most `within`.
async fn raw(gw: &Gateway, head: &[u8], within: Duration) -> String {
    let mut conn = TcpStream::connect(gw.addr).await.unwrap();
    let _ = conn.write_all(head).await;
    read_all(&mut conn, within).await
}

async fn read_all(conn: &mut TcpStream, within: Duration) -> String {
    let mut out = Vec::new();
    let _ = tokio::time::timeout(within, conn.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

fn status_of(answer: &str) -> &str {
    answer.get(9..12).unwrap_or("")
}

#[tokio::test]
async fn too_many_headers_and_huge_headers_are_431() {
    let gw = gateway(&config("  max_request_headers: 20\n")).await;
    let mut head =
        String::from("GET /health/liveliness HTTP/1.1\r\nhost: x\r\nconnection: close\r\n");
    for i in 0..30 {
        head.push_str(&format!("x-h{i}: v\r\n"));
    }
    head.push_str("\r\n");
    let a = raw(&gw, head.as_bytes(), Duration::from_secs(3)).await;
    assert_eq!(status_of(&a), "431", "{a}");

    let huge = format!(
        "GET /health/liveliness HTTP/1.1\r\nhost: x\r\nx-big: {}\r\nconnection: close\r\n\r\n",
        "a".repeat(100_000)
    );
    let a = raw(&gw, huge.as_bytes(), Duration::from_secs(3)).await;
    assert_eq!(status_of(&a), "431", "{a}");

    // Within the limits, served.
    let ok = raw(
        &gw,
        b"GET /health/liveliness HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
        Duration::from_secs(3),
    )
    .await;
    assert_eq!(status_of(&ok), "200", "{ok}");
}

#[tokio::test]
async fn a_long_url_is_414_with_an_openai_error() {
    let gw = gateway(&config("  max_url_length: 2048\n")).await;
    let models = |n: usize| {
        let url = gw.url(&format!("/v1/models?q={}", "a".repeat(n)));
        async move { send("GET", &url, "", &[]).await }
    };
    let a = models(3000).await;
    assert_eq!(a.status, 414, "{}", a.text());
    assert_eq!(a.json()["error"]["code"], "uri_too_long");
    assert!(a.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("2048"));
    assert_eq!(models(1000).await.status, 200);
}

#[tokio::test]
async fn deep_json_and_too_many_messages_are_400() {
    let gw = gateway(&config("  max_messages: 3\n")).await;
    let deep = format!(
        r#"{{"model":"m","messages":[{{"role":"user","content":{}"x"{}}}]}}"#,
        "[".repeat(5000),
        "]".repeat(5000)
    );
    let json = [("content-type", "application/json")];
    let a = send("POST", &gw.url("/v1/chat/completions"), deep, &json).await;
    assert_eq!(a.status, 400, "{}", a.text());
    assert_eq!(a.json()["error"]["code"], "json_too_deep");
    assert!(a.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("128"));
    // Anywhere in the body, not only in `messages`; brackets inside strings do not count.
    let deep_tools = format!(
        r#"{{"model":"m","messages":[],"tools":{}{}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    let a = send("POST", &gw.url("/v1/chat/completions"), deep_tools, &json).await;
    assert_eq!(a.status, 400, "{}", a.text());
    assert_eq!(a.json()["error"]["code"], "json_too_deep");
    let quoted = format!(
        r#"{{"model":"m","messages":[{{"role":"user","content":"{}"}}]}}"#,
        "[{".repeat(500)
    );
    let a = send("POST", &gw.url("/v1/chat/completions"), quoted, &json).await;
    assert_eq!(a.status, 200, "{}", a.text());

    let msg = r#"{"role":"user","content":"hi"}"#;
    let four = format!(r#"{{"model":"m","messages":[{msg},{msg},{msg},{msg}]}}"#);
    let a = send("POST", &gw.url("/v1/chat/completions"), four, &json).await;
    assert_eq!(a.status, 400, "{}", a.text());
    assert_eq!(a.json()["error"]["param"], "messages");
    assert!(a.json()["error"]["message"]
        .as_str()
        .unwrap()
        .contains("max_messages"));

    let three = format!(r#"{{"model":"m","messages":[{msg},{msg},{msg}]}}"#);
    let ok = send("POST", &gw.url("/v1/chat/completions"), three, &json).await;
    assert_eq!(ok.status, 200, "{}", ok.text());
}

#[tokio::test]
async fn slowloris_headers_and_silent_connections_are_cut() {
    let gw = gateway(&config("  header_read_timeout: 1\n")).await;
    let started = Instant::now();
    // Headers begun, never finished.
    let mut trickle = TcpStream::connect(gw.addr).await.unwrap();
    trickle
        .write_all(b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n")
        .await
        .unwrap();
    // Nothing sent at all, and a trickled h2 preface.
    let mut silent = TcpStream::connect(gw.addr).await.unwrap();
    let mut preface = TcpStream::connect(gw.addr).await.unwrap();
    preface.write_all(b"PRI * HT").await.unwrap();
    // Cut by the server's 1 s timeout, before this side gives up reading (an ordering: a
    // connection the server never cut would hold each read for the whole `PATIENCE`).
    for conn in [&mut trickle, &mut silent, &mut preface] {
        let a = read_all(conn, PATIENCE).await;
        assert!(!a.contains("200"), "{a}");
    }
    let took = started.elapsed();
    assert!(took < PATIENCE, "not cut: {took:?}");
    // Others are served meanwhile and after.
    assert_eq!(
        send("GET", &gw.url("/health/liveliness"), "", &[])
            .await
            .status,
        200
    );
}

#[tokio::test]
async fn a_trickled_body_is_408() {
    let gw = gateway(&config("  body_read_timeout: 1\n")).await;
    let mut conn = TcpStream::connect(gw.addr).await.unwrap();
    conn.write_all(
        b"POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{\"model\"",
    )
    .await
    .unwrap();
    // Answered by the server's 1 s timeout, before this side gives up reading.
    let started = Instant::now();
    let a = read_all(&mut conn, PATIENCE).await;
    assert_eq!(status_of(&a), "408", "{a}");
    assert!(a.contains("request_timeout"), "{a}");
    assert!(started.elapsed() < PATIENCE);
}

#[tokio::test]
async fn past_the_connection_cap_new_connections_wait_until_one_closes() {
    let gw = gateway(&config("  max_connections: 2\n")).await;
    // The listener accepts in the order the connections were made (the kernel's backlog is
    // first in, first out): the first two take the cap, whenever they are accepted.
    let held_a = TcpStream::connect(gw.addr).await.unwrap();
    let _held_b = TcpStream::connect(gw.addr).await.unwrap();
    let mut third = TcpStream::connect(gw.addr).await.unwrap();
    third
        .write_all(b"GET /health/liveliness HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
        .await
        .unwrap();
    // Wall time: that it is not answered is an absence, watched for a while.
    let waiting = read_all(&mut third, Duration::from_millis(700)).await;
    assert_eq!(waiting, "", "answered past the cap");
    drop(held_a);
    let a = read_all(&mut third, PATIENCE).await;
    assert_eq!(status_of(&a), "200", "{a}");
}

#[tokio::test]
async fn connections_past_the_per_address_rate_are_closed() {
    let gw = gateway(&config("  max_connection_rate_per_ip: 3\n")).await;
    let mut answered = 0;
    let mut conns = Vec::new();
    // 8 in a burst: however a second's boundary splits them, one side has more than 3.
    for _ in 0..8 {
        let mut c = TcpStream::connect(gw.addr).await.unwrap();
        let _ = c
            .write_all(b"GET /health/liveliness HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n")
            .await;
        conns.push(c);
    }
    for mut c in conns {
        if status_of(&read_all(&mut c, Duration::from_secs(3)).await) == "200" {
            answered += 1;
        }
    }
    assert!((3..8).contains(&answered), "{answered} of 8 answered");
}

/// An h2c connection to the gateway and its driver task.
async fn h2c(
    gw: &Gateway,
) -> (
    hyper::client::conn::http2::SendRequest<Empty<Bytes>>,
    tokio::task::JoinHandle<hyper::Result<()>>,
) {
    let conn = TcpStream::connect(gw.addr).await.unwrap();
    let (sender, h2) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(conn))
            .await
            .unwrap();
    (sender, tokio::spawn(h2))
}

#[tokio::test]
async fn h2_rapid_reset_does_not_stop_the_server() {
    let gw = gateway(&config("  max_connections: 100\n")).await;
    let (mut sender, driver) = h2c(&gw).await;
    // Open streams and cancel each at once (RST_STREAM), as fast as the connection takes them.
    for _ in 0..2000 {
        if sender.ready().await.is_err() {
            break;
        }
        let req = http::Request::get(gw.url("/health/liveliness"))
            .body(Empty::<Bytes>::new())
            .unwrap();
        let fut = sender.send_request(req);
        // Let the connection send the stream's HEADERS, then cancel it (RST_STREAM).
        tokio::task::yield_now().await;
        drop(fut);
    }
    drop(sender);
    let _ = tokio::time::timeout(Duration::from_secs(3), driver).await;
    // The gateway still answers, on HTTP/1.1 and on a fresh h2 connection.
    assert_eq!(
        send("GET", &gw.url("/health/liveliness"), "", &[])
            .await
            .status,
        200
    );
    let (mut sender, _driver) = h2c(&gw).await;
    let req = http::Request::get(gw.url("/health/liveliness"))
        .body(Empty::<Bytes>::new())
        .unwrap();
    let resp = sender.send_request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let _ = resp.into_body().collect().await;
}

/// The limit itself, not just survival: a client that opens streams and resets each before
/// the server has taken it (HEADERS then RST_STREAM, in bursts, CVE-2023-44487) gets a GOAWAY
/// with ENHANCE_YOUR_CALM once more than 20 such streams are pending, long before its 1,000th
/// stream; the server keeps answering on other connections.
#[tokio::test]
async fn h2_rapid_reset_limit_sends_goaway_enhance_your_calm() {
    let gw = gateway(&config("  max_connections: 100\n")).await;
    let tcp = TcpStream::connect(gw.addr).await.unwrap();
    let (client, connection) = h2::client::handshake(tcp).await.unwrap();
    let driver = tokio::spawn(connection);
    let mut client = client.ready().await.unwrap();
    let mut reset = 0;
    for _ in 0..1000 {
        let req = http::Request::get(gw.url("/health/liveliness"))
            .body(())
            .unwrap();
        let Ok((_answer, mut stream)) = client.send_request(req, false) else {
            break;
        };
        stream.send_reset(h2::Reason::CANCEL);
        reset += 1;
        client = match client.ready().await {
            Ok(c) => c,
            Err(_) => break,
        };
        if reset % 50 == 0 {
            // Let the connection task write the burst and read what the server says.
            tokio::task::yield_now().await;
        }
    }
    let ended = tokio::time::timeout(Duration::from_secs(5), driver)
        .await
        .expect("the server closed the connection")
        .unwrap();
    let e = ended.expect_err("the connection ended in an error");
    assert!(e.is_go_away() && e.is_remote(), "{e}");
    assert_eq!(e.reason(), Some(h2::Reason::ENHANCE_YOUR_CALM), "{e}");
    assert!(reset < 1000, "closed after {reset} reset streams");
    figure_line("h2 rapid reset: streams reset before GOAWAY", reset);
    let (mut sender, _driver) = h2c(&gw).await;
    let resp = sender
        .send_request(
            http::Request::get(gw.url("/health/liveliness"))
                .body(Empty::<Bytes>::new())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

/// A figure for docs/reliability.md, in the test's output.
#[expect(clippy::print_stdout, reason = "the figure is the test's output")]
fn figure_line(what: &str, value: impl std::fmt::Display) {
    println!("hardening figure: {what} = {value}");
}

#[tokio::test]
async fn past_the_in_flight_limit_the_newest_is_shed_and_readiness_fails_until_it_recovers() {
    let mock = mock_server(MockSettings {
        latency: Duration::from_millis(1500),
        ..MockSettings::default()
    })
    .await;
    let gw = gateway(&slow_config(&mock, "  max_in_flight_requests: 2\n")).await;
    let body = r#"{"model":"slow","messages":[{"role":"user","content":"hi"}]}"#;
    let json = [("content-type", "application/json")];
    let held: Vec<_> = (0..2)
        .map(|_| {
            let url = gw.url("/v1/chat/completions");
            tokio::spawn(async move { send("POST", &url, body, &json).await.status })
        })
        .collect();
    let ready = gw.url("/health/readiness");
    assert!(
        eventually(PATIENCE, || async {
            send("GET", &ready, "", &[]).await.status == 503
        })
        .await,
        "readiness did not turn 503 while the slots were held"
    );
    let shed = send("POST", &gw.url("/v1/chat/completions"), body, &json).await;
    assert_eq!(shed.status, 503, "{}", shed.text());
    assert_eq!(shed.header("retry-after"), Some("1"));
    assert_eq!(shed.json()["error"]["type"], "overloaded_error");
    assert_eq!(shed.json()["error"]["code"], "overloaded");
    // Probes and metrics are answered meanwhile.
    assert_eq!(
        send("GET", &gw.url("/health/liveliness"), "", &[])
            .await
            .status,
        200
    );
    let metrics = send("GET", &gw.url("/metrics"), "", &[]).await.text();
    assert!(
        metrics.contains("sluice_shed_requests_total{reason=\"in_flight\"} 1"),
        "{metrics}"
    );
    for h in held {
        assert_eq!(h.await.unwrap(), 200);
    }
    assert_eq!(send("GET", &ready, "", &[]).await.status, 200);
    let after = send(
        "POST",
        &gw.url("/v1/chat/completions"),
        CHAT.replace("\"m\"", "\"slow\""),
        &json,
    )
    .await;
    assert_eq!(after.status, 200, "{}", after.text());
}
