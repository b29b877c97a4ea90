//! sluice's own HTTP/1.1 client against small real servers on loopback.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::BodyExt as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

use super::*;

/// A server that answers each request on a connection with `answer(n)` (n counts requests on
/// that connection from 0), closing after it when `answer` says so. Returns its port and the
/// number of connections it accepted.
async fn server<F>(answer: F) -> (u16, Arc<AtomicUsize>)
where
    F: Fn(usize, &[u8]) -> (Vec<u8>, bool) + Send + Sync + 'static,
{
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    let answer = Arc::new(answer);
    tokio::spawn(async move {
        while let Ok((sock, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            let answer = answer.clone();
            tokio::spawn(serve(sock, move |n, req| answer(n, req)));
        }
    });
    (port, accepted)
}

/// Read requests (head plus a content-length body) off `sock` and answer each.
async fn serve(mut sock: TcpStream, answer: impl Fn(usize, &[u8]) -> (Vec<u8>, bool)) {
    let mut buf = Vec::new();
    let mut n = 0;
    loop {
        let end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 65536];
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(k) => buf.extend_from_slice(&chunk[..k]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .map_or(0, |v| v.trim().parse().unwrap());
        while buf.len() < end + len {
            let mut chunk = [0u8; 65536];
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(k) => buf.extend_from_slice(&chunk[..k]),
            }
        }
        let request: Vec<u8> = buf.drain(..end + len).collect();
        let (bytes, close) = answer(n, &request);
        n += 1;
        if sock.write_all(&bytes).await.is_err() || close {
            return;
        }
    }
}

fn post(port: u16, body: &'static [u8]) -> (Request<()>, Vec<Bytes>, u64) {
    let req = Request::post(format!("http://127.0.0.1:{port}/v1/chat/completions"))
        .header("authorization", "Bearer k")
        .body(())
        .unwrap();
    (req, vec![Bytes::from_static(body)], body.len() as u64)
}

async fn call(
    pool: &Arc<Pool>,
    port: u16,
    body: &'static [u8],
) -> Result<(StatusCode, Vec<u8>), Error> {
    let (req, segs, len) = post(port, body);
    let resp = send(pool.clone(), Duration::from_secs(2), req, segs, len).await?;
    let status = resp.status();
    let bytes = resp.into_body().collect().await?.to_bytes();
    Ok((status, bytes.to_vec()))
}

#[tokio::test]
async fn kept_connections_carry_the_next_requests() {
    let (port, accepted) = server(|n, req| {
        assert!(req.starts_with(b"POST /v1/chat/completions HTTP/1.1\r\n"));
        let body = format!("answer {n}");
        (
            format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes(),
            false,
        )
    })
    .await;
    let pool = Arc::new(Pool::new(8));
    for n in 0..3 {
        let (status, body) = call(&pool, port, b"{}").await.unwrap();
        assert_eq!(status, 200);
        assert_eq!(body, format!("answer {n}").as_bytes());
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "one connection for all three"
    );
    assert_eq!(pool.idle_count(), 1);
}

#[tokio::test]
async fn chunked_and_until_close_answers_are_read_whole() {
    let (port, accepted) = server(|n, _| match n {
        0 => (b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n".to_vec(), false),
        _ => (b"HTTP/1.1 200 OK\r\n\r\nuntil the end".to_vec(), true),
    })
    .await;
    let pool = Arc::new(Pool::new(8));
    assert_eq!(call(&pool, port, b"{}").await.unwrap().1, b"hello world");
    assert_eq!(call(&pool, port, b"{}").await.unwrap().1, b"until the end");
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
    assert_eq!(pool.idle_count(), 0, "a body read to the close is not kept");
}

#[tokio::test]
async fn a_connection_the_upstream_closed_is_replaced() {
    // The server closes every connection after its answer, without saying so.
    let (port, accepted) = server(|_, _| {
        (
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok".to_vec(),
            true,
        )
    })
    .await;
    let pool = Arc::new(Pool::new(8));
    for _ in 0..3 {
        assert_eq!(call(&pool, port, b"{}").await.unwrap().1, b"ok");
        // Let the close arrive.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_body_dropped_before_its_end_closes_its_connection() {
    let (port, accepted) = server(|_, _| {
        (
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n".to_vec(),
            false,
        )
    })
    .await;
    let pool = Arc::new(Pool::new(8));
    let (req, segs, len) = post(port, b"{}");
    let resp = send(pool.clone(), Duration::from_secs(2), req, segs, len)
        .await
        .unwrap();
    let mut body = resp.into_body();
    let first = body.frame().await.unwrap().unwrap().into_data().unwrap();
    assert_eq!(&first[..], b"hello");
    drop(body);
    assert_eq!(pool.idle_count(), 0);
    let (req, segs, len) = post(port, b"{}");
    let _ = send(pool.clone(), Duration::from_secs(2), req, segs, len)
        .await
        .unwrap();
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_large_body_goes_whole_in_its_segments() {
    static BIG: [u8; 3 << 20] = [b'x'; 3 << 20];
    let (port, _) = server(|_, req| {
        let body_len = req.len() - (req.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4);
        let text = body_len.to_string();
        (
            format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{text}",
                text.len()
            )
            .into_bytes(),
            false,
        )
    })
    .await;
    let pool = Arc::new(Pool::new(8));
    let req = Request::post(format!("http://127.0.0.1:{port}/"))
        .body(())
        .unwrap();
    let segs = vec![
        Bytes::from_static(b"{\"a\":\""),
        Bytes::from_static(&BIG),
        Bytes::new(),
        Bytes::from_static(b"\"}"),
    ];
    let len = segs.iter().map(|s| s.len() as u64).sum();
    let resp = send(pool.clone(), Duration::from_secs(2), req, segs, len)
        .await
        .unwrap();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(body, (3 << 20 | 8).to_string().as_bytes());
}

#[tokio::test]
async fn nothing_listening_is_a_connect_failure() {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let pool = Arc::new(Pool::new(8));
    let err = call(&pool, port, b"{}").await.unwrap_err();
    assert!(err.is_connect(), "{err}");
}

#[tokio::test]
async fn a_bad_answer_is_an_error_not_a_guess() {
    let (port, _) = server(|_, _| {
        (
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 3\r\n\r\nok".to_vec(),
            false,
        )
    })
    .await;
    let pool = Arc::new(Pool::new(8));
    assert!(matches!(
        call(&pool, port, b"{}").await,
        Err(Error::Framing(_))
    ));
    let (port, _) = server(|_, _| {
        (
            b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort".to_vec(),
            true,
        )
    })
    .await;
    assert!(matches!(
        call(&pool, port, b"{}").await,
        Err(Error::Body(_))
    ));
}

#[tokio::test]
async fn a_large_answer_is_read_whole() {
    let (port, _) = server(|_, _| {
        let body = "y".repeat(3 << 20);
        (
            format!(
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            )
            .into_bytes(),
            false,
        )
    })
    .await;
    let pool = Arc::new(Pool::new(8));
    let (status, body) = call(&pool, port, b"{}").await.unwrap();
    assert_eq!(status, 200);
    assert_eq!(body.len(), 3 << 20);
    assert!(body.iter().all(|&b| b == b'y'));
    assert_eq!(
        pool.idle_count(),
        1,
        "read to its length, the connection is kept"
    );
}
