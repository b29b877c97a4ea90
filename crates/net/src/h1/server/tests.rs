//! The own HTTP/1.1 path against raw sockets: what it serves itself, what it hands to hyper
//! (the handler says which read the body), and how answers are framed.

use std::convert::Infallible;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt as _, Full};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use super::RequestBody;
use crate::server::{serve_on, ConnLimits};

/// A body of unknown length that gives its chunks one at a time.
struct Chunks(std::collections::VecDeque<Bytes>);

impl http_body::Body for Chunks {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Infallible>>> {
        std::task::Poll::Ready(
            self.get_mut()
                .0
                .pop_front()
                .map(|c| Ok(http_body::Frame::data(c))),
        )
    }
}

#[allow(dead_code)]
type Answer = UnsyncBoxBody<Bytes, Infallible>;

/// Drops counted: a handler's future dropped before it finished.
#[derive(Default)]
struct Seen {
    cancelled: AtomicUsize,
}

struct Guard(Arc<Seen>, bool);

impl Drop for Guard {
    fn drop(&mut self) {
        if !self.1 {
            self.0.cancelled.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// A server whose answers say which path read the request (`own` or `hyper`) and echo its
/// method, path and body; `/slow` answers after a second, `/stream` in three chunks of unknown
/// length.
async fn server(limits: ConnLimits) -> (String, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let seen = Arc::new(Seen::default());
    let s = seen.clone();
    let handler = move |req: Request<RequestBody>| {
        let seen = s.clone();
        async move {
            let mut guard = Guard(seen, false);
            let path = req.uri().path().to_owned();
            let method = req.method().clone();
            let via = match req.body() {
                RequestBody::Whole(_) => "own",
                RequestBody::Hyper(_) => "hyper",
            };
            let body = req.into_body().collect().await.unwrap().to_bytes();
            if path == "/slow" {
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            guard.1 = true;
            if path == "/stream" {
                let chunks = ["one ", "two ", "three"].map(Bytes::from).into();
                return Response::new(Chunks(chunks).boxed_unsync());
            }
            let text = format!("{via} {method} {path} {}", String::from_utf8_lossy(&body));
            Response::new(
                Full::new(Bytes::from(text))
                    .map_err(|e| match e {})
                    .boxed_unsync(),
            )
        }
    };
    tokio::spawn(serve_on(
        listener,
        None,
        handler,
        std::future::pending::<()>(),
        Duration::ZERO,
        limits,
    ));
    (addr, seen)
}

fn limits() -> ConnLimits {
    ConnLimits {
        header_read_timeout: Duration::from_millis(500),
        ..ConnLimits::default()
    }
}

/// Send `bytes`, read until the server closes.
async fn exchange(addr: &str, bytes: &[u8]) -> String {
    let mut c = TcpStream::connect(addr).await.unwrap();
    c.write_all(bytes).await.unwrap();
    let mut out = Vec::new();
    let _ = tokio::time::timeout(Duration::from_secs(5), c.read_to_end(&mut out)).await;
    String::from_utf8_lossy(&out).into_owned()
}

fn bodies(answer: &str) -> Vec<&str> {
    answer
        .split("HTTP/1.1 ")
        .skip(1)
        .map(|a| a.split("\r\n\r\n").nth(1).unwrap_or(""))
        .collect()
}

#[tokio::test]
async fn pipelined_requests_are_answered_in_order_on_the_own_path() {
    let (addr, _) = server(limits()).await;
    let answer = exchange(
        &addr,
        b"POST /a HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\n\r\nhelloGET /b HTTP/1.1\r\nhost: x\r\n\r\nPOST /c HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok",
    )
    .await;
    assert_eq!(
        bodies(&answer),
        ["own POST /a hello", "own GET /b ", "own POST /c ok"],
        "{answer}"
    );
    assert!(answer.contains("content-length: 17\r\n"), "{answer}");
    assert!(answer.contains("date: "), "{answer}");
    assert!(
        answer.ends_with("connection: close\r\n\r\nown POST /c ok"),
        "{answer}"
    );
}

#[tokio::test]
async fn doubtful_framing_and_rare_features_go_to_hyper() {
    let (addr, _) = server(limits()).await;
    // Chunked upload: hyper reads it.
    let a = exchange(
        &addr,
        b"POST /t HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
    )
    .await;
    assert_eq!(bodies(&a), ["hyper POST /t abc"], "{a}");
    // A first request on the own path, then one for hyper on the same connection.
    let a = exchange(
        &addr,
        b"GET /1 HTTP/1.1\r\nhost: x\r\n\r\nPOST /2 HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n2\r\nhi\r\n0\r\n\r\n",
    )
    .await;
    assert_eq!(bodies(&a), ["own GET /1 ", "hyper POST /2 hi"], "{a}");
    // HTTP/1.0 and Expect: hyper's.
    let a = exchange(&addr, b"GET /old HTTP/1.0\r\n\r\n").await;
    assert!(
        a.starts_with("HTTP/1.0 200") && a.ends_with("hyper GET /old "),
        "{a}"
    );
    let a = exchange(
        &addr,
        b"POST /e HTTP/1.1\r\nhost: x\r\nexpect: 100-continue\r\ncontent-length: 1\r\nconnection: close\r\n\r\nz",
    )
    .await;
    assert!(a.ends_with("hyper POST /e z"), "{a}");
}

#[tokio::test]
async fn smuggling_shapes_never_reach_the_own_path() {
    let (addr, _) = server(limits()).await;
    for bad in [
        // A length beside a transfer coding, both orders.
        &b"POST /s HTTP/1.1\r\nhost: x\r\ncontent-length: 4\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nhost: x\r\n\r\n"[..],
        b"POST /s HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\ncontent-length: 4\r\n\r\n0\r\n\r\nGET /smuggled HTTP/1.1\r\nhost: x\r\n\r\n",
        // Two lengths, a signed one, a list.
        b"POST /s HTTP/1.1\r\nhost: x\r\ncontent-length: 1\r\ncontent-length: 30\r\n\r\nxGET /smuggled HTTP/1.1\r\nhost: x\r\n\r\n",
        b"POST /s HTTP/1.1\r\nhost: x\r\ncontent-length: +1\r\n\r\nxGET /smuggled HTTP/1.1\r\nhost: x\r\n\r\n",
        b"POST /s HTTP/1.1\r\nhost: x\r\ncontent-length: 1, 1\r\n\r\nxGET /smuggled HTTP/1.1\r\nhost: x\r\n\r\n",
        // An obsolete line folding, a space before the colon, a bare LF in a value.
        b"POST /s HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\nx-a: b\r\n c\r\n\r\n",
        b"POST /s HTTP/1.1\r\nhost: x\r\ncontent-length : 5\r\n\r\nhello",
    ] {
        let a = exchange(&addr, bad).await;
        assert!(!a.contains("own "), "the own path took {:?}: {a}", String::from_utf8_lossy(bad));
        assert!(!a.contains("/smuggled"), "{a}");
    }
}

#[tokio::test]
async fn a_body_that_is_slow_to_come_is_read_by_hyper() {
    let (addr, _) = server(limits()).await;
    let mut c = TcpStream::connect(&addr).await.unwrap();
    c.write_all(
        b"POST /late HTTP/1.1\r\nhost: x\r\ncontent-length: 4\r\nconnection: close\r\n\r\nab",
    )
    .await
    .unwrap();
    tokio::time::sleep(super::BODY_WAIT + Duration::from_millis(150)).await;
    c.write_all(b"cd").await.unwrap();
    let mut out = String::new();
    c.read_to_string(&mut out).await.unwrap();
    assert_eq!(bodies(&out), ["hyper POST /late abcd"], "{out}");
}

#[tokio::test]
async fn a_stream_of_unknown_length_is_chunked_and_head_has_no_body() {
    let (addr, _) = server(limits()).await;
    let a = exchange(
        &addr,
        b"GET /stream HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert!(a.contains("transfer-encoding: chunked\r\n"), "{a}");
    assert!(
        a.ends_with("\r\n\r\n4\r\none \r\n4\r\ntwo \r\n5\r\nthree\r\n0\r\n\r\n"),
        "{a}"
    );
    let a = exchange(
        &addr,
        b"HEAD /h HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert!(a.contains("content-length: 12\r\n"), "{a}");
    assert!(a.ends_with("\r\n\r\n"), "no body after a HEAD answer: {a}");
}

#[tokio::test]
async fn a_client_that_leaves_cancels_its_request() {
    let (addr, seen) = server(limits()).await;
    let mut c = TcpStream::connect(&addr).await.unwrap();
    c.write_all(b"GET /slow HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    drop(c);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        seen.cancelled.load(Ordering::SeqCst),
        1,
        "the handler was dropped"
    );
}

#[tokio::test]
async fn an_idle_or_slow_head_is_cut_at_the_header_read_timeout_and_a_huge_one_is_hypers_431() {
    let (addr, _) = server(limits()).await;
    // Idle after one answer: closed at the timeout (500 ms here).
    let mut c = TcpStream::connect(&addr).await.unwrap();
    c.write_all(b"GET /a HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let started = std::time::Instant::now();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(3), c.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    assert!(
        started.elapsed() >= Duration::from_millis(400),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(bodies(&String::from_utf8_lossy(&out)), ["own GET /a "]);
    // A head trickled past the timeout: closed with no answer.
    let mut c = TcpStream::connect(&addr).await.unwrap();
    c.write_all(b"GET /a HTTP/1.1\r\n").await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(Duration::from_secs(3), c.read_to_end(&mut out))
        .await
        .unwrap()
        .unwrap();
    assert!(out.is_empty());
    // A head larger than the limit: hyper's 431.
    let big = format!(
        "GET /a HTTP/1.1\r\nhost: x\r\nx-big: {}\r\n\r\n",
        "a".repeat(70 * 1024)
    );
    let a = exchange(&addr, big.as_bytes()).await;
    assert!(a.starts_with("HTTP/1.1 431"), "{a}");
}
