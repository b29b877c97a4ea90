//! End-to-end: uploads relayed as they arrive. A client that sends its form slowly has its
//! file reach the upstream before it has finished sending (sluice holds only the form's
//! head), byte for byte; a deployment that could not be reached leaves the upload for the
//! next one; a deployment that failed after reading it ends the request (an upload is sent
//! once, never held whole to send again).
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

const BOUNDARY: &str = "upload-boundary";

/// An upstream that reads uploads frame by frame, publishing how many bytes of the current
/// one it has so far, and answers with their length and hash (or a 500, once it read all).
struct Upstream {
    addr: SocketAddr,
    received: watch::Receiver<usize>,
    requests: Arc<AtomicUsize>,
}

async fn upstream(fail: bool) -> Upstream {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, received) = watch::channel(0usize);
    let tx = Arc::new(tx);
    let requests = Arc::new(AtomicUsize::new(0));
    let counted = requests.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let tx = tx.clone();
            let counted = counted.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<Incoming>| {
                    let tx = tx.clone();
                    let counted = counted.clone();
                    async move {
                        counted.fetch_add(1, Ordering::SeqCst);
                        let mut body = req.into_body();
                        let mut all = Vec::new();
                        tx.send_replace(0);
                        while let Some(Ok(frame)) = body.frame().await {
                            if let Ok(d) = frame.into_data() {
                                all.extend_from_slice(&d);
                                tx.send_replace(all.len());
                            }
                        }
                        let (status, answer) = if fail {
                            (
                                500,
                                r#"{"error":{"message":"upstream broke","type":"server_error"}}"#
                                    .to_owned(),
                            )
                        } else {
                            (
                                200,
                                format!(
                                    r#"{{"text":"{} bytes fnv1a {:016x}"}}"#,
                                    all.len(),
                                    fnv1a(&all)
                                ),
                            )
                        };
                        let mut r = Response::new(Full::new(Bytes::from(answer)));
                        *r.status_mut() = StatusCode::from_u16(status).unwrap();
                        r.headers_mut()
                            .insert("content-type", "application/json".parse().unwrap());
                        Ok::<_, Infallible>(r)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    Upstream {
        addr,
        received,
        requests,
    }
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The form the openai SDK sends: fields first, then the file.
fn form_parts(model: &str, file: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let head = format!(
        "--{BOUNDARY}\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\n{model}\r\n\
         --{BOUNDARY}\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\n\
         Content-Type: audio/wav\r\n\r\n"
    )
    .into_bytes();
    let mut tail = file.to_vec();
    tail.extend_from_slice(format!("\r\n--{BOUNDARY}--\r\n").as_bytes());
    (head, tail)
}

fn config(deployments: &[(&str, &str)]) -> String {
    let mut yaml = String::from("model_list:\n");
    for (base, cost) in deployments {
        yaml.push_str(&format!(
            "  - model_name: whisper\n    litellm_params:\n      model: openai/whisper-1\n      \
             api_base: {base}\n      input_cost_per_token: {cost}\n      output_cost_per_token: {cost}\n"
        ));
    }
    yaml.push_str(
        "router_settings:\n  routing_strategy: cost-based-routing\n  num_retries: 2\n\
         general_settings:\n  master_key: sk-master\n",
    );
    yaml
}

type Sender = mpsc::Sender<Result<Frame<Bytes>, Infallible>>;

/// Start an upload whose body the test sends frame by frame; the answer's status and body.
fn start_upload(
    gw: &Gateway,
    length: usize,
) -> (Sender, tokio::task::JoinHandle<(StatusCode, Bytes)>) {
    let (tx, rx) = mpsc::channel::<Result<Frame<Bytes>, Infallible>>(4);
    let body = StreamBody::new(Box::pin(futures_util::stream::unfold(
        rx,
        |mut rx| async move { rx.recv().await.map(|f| (f, rx)) },
    )));
    let req = Request::post(gw.url("/v1/audio/transcriptions"))
        .header("authorization", "Bearer sk-master")
        .header(
            "content-type",
            format!("multipart/form-data; boundary={BOUNDARY}"),
        )
        .header("content-length", length)
        .body(body)
        .unwrap();
    let client: Client<HttpConnector, _> =
        Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let answer = tokio::spawn(async move {
        let resp = client.request(req).await.expect("answered");
        let status = resp.status();
        (status, resp.into_body().collect().await.unwrap().to_bytes())
    });
    (tx, answer)
}

async fn send_all(tx: &Sender, bytes: &[u8]) {
    for chunk in bytes.chunks(64 * 1024) {
        tx.send(Ok(Frame::data(Bytes::copy_from_slice(chunk))))
            .await
            .unwrap();
    }
}

#[tokio::test]
async fn the_file_reaches_the_upstream_while_the_client_is_still_sending_it() {
    let up = upstream(false).await;
    let gw = gateway(&config(&[(&format!("http://{}/v1", up.addr), "0.000001")])).await;
    let file: Vec<u8> = (0..4_000_000u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let (head, tail) = form_parts("whisper", &file);
    let (tx, answer) = start_upload(&gw, head.len() + tail.len());
    // The head and the first half of the file; the rest only once the upstream has the half.
    send_all(&tx, &head).await;
    let half = tail.len() / 2;
    send_all(&tx, &tail[..half]).await;
    let mut received = up.received.clone();
    let seen = tokio::time::timeout(
        Duration::from_secs(10),
        received.wait_for(|n| *n >= head.len() + half - 64 * 1024),
    )
    .await
    .is_ok_and(|r| r.is_ok());
    assert!(
        seen,
        "the upstream got {} bytes of the first {} while the client waited: the upload was held",
        *up.received.borrow(),
        head.len() + half
    );
    send_all(&tx, &tail[half..]).await;
    drop(tx);
    let (status, body) = answer.await.unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    // The upstream got the form byte for byte, the deployment's model spliced in.
    let sent = [head.replace_model("whisper", "whisper-1"), tail].concat();
    let text = String::from_utf8_lossy(&body);
    assert!(
        text.contains(&format!("{} bytes fnv1a {:016x}", sent.len(), fnv1a(&sent))),
        "{text}"
    );
}

#[tokio::test]
async fn an_unreachable_deployment_leaves_the_upload_to_the_next_one() {
    // The cheapest deployment is tried first: nothing listens there.
    let closed = TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap()
        .local_addr()
        .unwrap();
    let up = upstream(false).await;
    let gw = gateway(&config(&[
        (&format!("http://{closed}/v1"), "0.0000001"),
        (&format!("http://{}/v1", up.addr), "0.000001"),
    ]))
    .await;
    let file = vec![42u8; 1_000_000];
    let (head, tail) = form_parts("whisper", &file);
    let (tx, answer) = start_upload(&gw, head.len() + tail.len());
    send_all(&tx, &head).await;
    send_all(&tx, &tail).await;
    drop(tx);
    let (status, body) = answer.await.unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));
    let sent = [head.replace_model("whisper", "whisper-1"), tail].concat();
    assert!(String::from_utf8_lossy(&body).contains(&format!("{} bytes", sent.len())));
    assert_eq!(up.requests.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_deployment_that_failed_after_reading_the_upload_ends_the_request() {
    let broken = upstream(true).await;
    let good = upstream(false).await;
    let mut gw = gateway(&config(&[
        (&format!("http://{}/v1", broken.addr), "0.0000001"),
        (&format!("http://{}/v1", good.addr), "0.000001"),
    ]))
    .await;
    let (head, tail) = form_parts("whisper", &vec![7u8; 1_000_000]);
    let (tx, answer) = start_upload(&gw, head.len() + tail.len());
    send_all(&tx, &head).await;
    send_all(&tx, &tail).await;
    drop(tx);
    let (status, body) = answer.await.unwrap();
    // The upstream's own error, not a retry that would have to send a spent upload.
    assert_eq!(status, 500, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("upstream broke"));
    assert_eq!(broken.requests.load(Ordering::SeqCst), 1);
    assert_eq!(good.requests.load(Ordering::SeqCst), 0, "no second attempt");
    let r = gw.next_record().await;
    assert_eq!(r.status, 500);
    assert_eq!(r.retries, 0);
    // A small upload is read whole, and retried as before.
    let (head, tail) = form_parts("whisper", &[7u8; 10_000]);
    let mut whole = head.clone();
    whole.extend_from_slice(&tail);
    let a = send(
        "POST",
        &gw.url("/v1/audio/transcriptions"),
        whole,
        &[
            MASTER,
            (
                "content-type",
                &format!("multipart/form-data; boundary={BOUNDARY}"),
            ),
        ],
    )
    .await;
    assert_eq!(a.status, 200, "{}", a.text());
    assert_eq!(good.requests.load(Ordering::SeqCst), 1);
}

trait ReplaceModel {
    fn replace_model(&self, from: &str, to: &str) -> Vec<u8>;
}

impl ReplaceModel for Vec<u8> {
    /// The head as the upstream gets it: the deployment's model in the model field.
    fn replace_model(&self, from: &str, to: &str) -> Vec<u8> {
        let text = String::from_utf8(self.clone()).unwrap();
        text.replacen(
            &format!("\r\n\r\n{from}\r\n"),
            &format!("\r\n\r\n{to}\r\n"),
            1,
        )
        .into_bytes()
    }
}
