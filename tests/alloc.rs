//! Heap allocations sluice makes per proxied request, counted, with a target per path (issue
//! 22: "per-request allocations: count them in a test"). Every allocation in the process is
//! counted; the client and the mock are the same in both runs, so the count through sluice less
//! the count calling the mock directly is what sluice itself allocates per request: the worker
//! (pipeline, relay, recorder task, metrics) and whatever runs beside it (the spend writer).
//! A change that allocates more per request fails here and says by how much; one that allocates
//! less should lower the target in the same commit. The same counter, by bytes live, gives what
//! a stream held open keeps on the heap (issue 44: "hold it with a test that counts bytes per
//! held stream").
//!
//! Its own test binary: counting needs its own global allocator.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]
// The counting allocator is the one unsafe impl here: it forwards to the system allocator.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::time::Duration;

use sluice::server::{self, AppState, ServiceOptions, Services};
use sluice_core::record::RecordSink;
use sluice_mock::MockSettings;
use sluice_telemetry::{LogSink, Recorder};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Allocations (not frees, not reallocations that stay in place) since the process began.
static ALLOCATIONS: AtomicU64 = AtomicU64::new(0);
/// Heap bytes live now (allocated less freed), for what an open stream holds.
static LIVE: AtomicI64 = AtomicI64::new(0);

struct Counting;

// SAFETY: every call is forwarded unchanged to the system allocator; only a counter is added.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        System.alloc(layout)
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        LIVE.fetch_add(layout.size() as i64, Ordering::Relaxed);
        System.alloc_zeroed(layout)
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        LIVE.fetch_add(new_size as i64 - layout.size() as i64, Ordering::Relaxed);
        System.realloc(ptr, layout, new_size)
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as i64, Ordering::Relaxed);
        System.dealloc(ptr, layout)
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

const WARMUP: u64 = 200;
const REQUESTS: u64 = 1000;

/// A 1 KB chat request, as `sluice bench` sends (its `--sizes 1k`).
fn chat_body(stream: bool) -> String {
    let filler = "lorem ipsum dolor sit amet ".repeat(34);
    let options = if stream {
        r#","stream":true,"stream_options":{"include_usage":true}"#
    } else {
        ""
    };
    format!(
        r#"{{"model":"bench","messages":[{{"role":"system","content":"You are terse."}},{{"role":"user","content":"{filler}"}}]{options}}}"#
    )
}

/// One keep-alive HTTP/1.1 connection that sends the same request again and again, reading
/// each answer whole (by its length, or to the last chunk) into one reused buffer.
struct Client {
    conn: TcpStream,
    request: Vec<u8>,
    buf: Vec<u8>,
}

impl Client {
    async fn new(addr: &str, path: &str, body: &str, key: Option<&str>) -> Self {
        Self::with_buffer(addr, path, body, key, 256 * 1024).await
    }

    /// A client whose answer buffer starts at `capacity` bytes.
    async fn with_buffer(
        addr: &str,
        path: &str,
        body: &str,
        key: Option<&str>,
        capacity: usize,
    ) -> Self {
        let auth = key
            .map(|k| format!("authorization: Bearer {k}\r\n"))
            .unwrap_or_default();
        let request = format!(
            "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n{auth}content-length: {}\r\n\r\n{body}",
            body.len()
        )
        .into_bytes();
        let conn = TcpStream::connect(addr).await.unwrap();
        conn.set_nodelay(true).unwrap();
        Self {
            conn,
            request,
            buf: Vec::with_capacity(capacity),
        }
    }

    /// Send once and read until the answer's first event has arrived (the stream then stays
    /// open, held by the mock's pause).
    async fn first_event(&mut self) {
        self.conn.write_all(&self.request).await.unwrap();
        self.buf.clear();
        while memchr::memmem::find(&self.buf, b"data:").is_none() {
            let mut chunk = [0u8; 4096];
            let n = self.conn.read(&mut chunk).await.unwrap();
            assert!(
                n > 0,
                "connection closed before the first event: {}",
                String::from_utf8_lossy(&self.buf)
            );
            self.buf.extend_from_slice(&chunk[..n]);
        }
        assert!(
            self.buf.starts_with(b"HTTP/1.1 200"),
            "{}",
            String::from_utf8_lossy(&self.buf)
        );
    }

    /// Send once; the answer's status.
    async fn once(&mut self) -> u16 {
        self.conn.write_all(&self.request).await.unwrap();
        self.buf.clear();
        loop {
            if let Some(status) = complete(&self.buf) {
                return status;
            }
            let mut chunk = [0u8; 16 * 1024];
            let n = self.conn.read(&mut chunk).await.unwrap();
            assert!(n > 0, "connection closed mid-answer");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// The status of a whole HTTP/1.1 answer in `buf`, or `None` while more is due.
fn complete(buf: &[u8]) -> Option<u16> {
    let head_end = memchr::memmem::find(buf, b"\r\n\r\n")? + 4;
    let head = std::str::from_utf8(&buf[..head_end])
        .unwrap()
        .to_ascii_lowercase();
    let status = head.get(9..12)?.parse().unwrap();
    let body = &buf[head_end..];
    if let Some(len) = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map(|v| v.trim().parse::<usize>().unwrap())
    {
        return (body.len() >= len).then_some(status);
    }
    body.ends_with(b"0\r\n\r\n").then_some(status)
}

/// Allocations per request over `REQUESTS` sends after `WARMUP`, all answered 200.
async fn allocations_per_request(client: &mut Client) -> f64 {
    for _ in 0..WARMUP {
        assert_eq!(
            client.once().await,
            200,
            "{}",
            String::from_utf8_lossy(&client.buf)
        );
    }
    // Let the recorder and the spend writer finish the warm-up's records first.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    for _ in 0..REQUESTS {
        assert_eq!(client.once().await, 200);
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let after = ALLOCATIONS.load(Ordering::Relaxed);
    (after - before) as f64 / REQUESTS as f64
}

/// The mock provider on a loopback port; its address.
async fn mock() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    tokio::spawn(sluice_mock::serve(
        listener,
        MockSettings::default(),
        std::future::pending::<()>(),
    ));
    addr
}

/// sluice as `sluice serve` runs it (one worker thread of its own, the recorder on it, the
/// store's writer on this runtime) with `yaml`; its address.
async fn gateway(yaml: &str) -> String {
    let loaded = sluice_config::load_str(yaml, &HashMap::new()).expect("config loads");
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join("alloc")
        .join(sluice_core::random::uuid_v4().to_string());
    std::fs::create_dir_all(&dir).unwrap();
    let options = ServiceOptions { data_dir: dir };
    let services = Services::start(&loaded.config, &options).await.unwrap();
    let mut sinks: Vec<Box<dyn RecordSink>> = vec![Box::new(LogSink)];
    sinks.extend(services.sinks());
    let (recorder, _task) = Recorder::start_with(sinks, options.callbacks());
    let state = AppState::with_services(&loaded.config, recorder, services, 1).unwrap();
    let listeners = sluice_net::server::bind_workers("127.0.0.1:0".parse().unwrap(), 1)
        .await
        .unwrap();
    let addr = listeners[0].local_addr().unwrap().to_string();
    tokio::spawn(server::serve_workers(
        listeners,
        None,
        state,
        std::future::pending::<()>(),
        Duration::from_secs(1),
    ));
    addr
}

/// What sluice allocates per request on `path` with `body`, over the direct figure.
async fn added(yaml_extra: &str, key: Option<&str>, body: &str) -> (f64, f64) {
    let mock = mock().await;
    let yaml = format!(
        "model_list:\n  - model_name: bench\n    litellm_params: {{model: openai/bench, api_base: \"http://{mock}/v1\", api_key: sk-mock}}\n{yaml_extra}"
    );
    let gw = gateway(&yaml).await;
    let key = match key {
        Some("virtual") => Some(virtual_key(&gw).await),
        Some(k) => Some(k.to_owned()),
        None => None,
    };
    let mut direct = Client::new(&mock, "/v1/chat/completions", body, Some("sk-mock")).await;
    let mut through = Client::new(&gw, "/v1/chat/completions", body, key.as_deref()).await;
    let direct = allocations_per_request(&mut direct).await;
    let through = allocations_per_request(&mut through).await;
    (through - direct, direct)
}

/// Streams held open at once for the held-stream figure.
const HELD: usize = 200;

/// Heap bytes per stream held open on `addr`: `HELD` streams, each read to its first event and
/// then paused by the mock (`mock_fault`: one chunk, then a minute's wait), measured once all
/// are open; the clients' own buffers are the same on both sides of the difference.
async fn bytes_per_held_stream(addr: &str, key: Option<&str>) -> f64 {
    let body = chat_body(true).replacen(
        r#""stream":true"#,
        r#""stream":true,"mock_fault":{"stall_after_chunks":1,"stall_ms":60000}"#,
        1,
    );
    // One stream first, so that what is made once (pools, tables) is not counted per stream.
    let mut first = Client::with_buffer(addr, "/v1/chat/completions", &body, key, 4096).await;
    first.first_event().await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = LIVE.load(Ordering::Relaxed);
    let mut held = Vec::with_capacity(HELD);
    for _ in 0..HELD {
        let mut c = Client::with_buffer(addr, "/v1/chat/completions", &body, key, 4096).await;
        c.first_event().await;
        held.push(c);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = LIVE.load(Ordering::Relaxed);
    drop(held);
    drop(first);
    (after - before) as f64 / HELD as f64
}

/// A virtual key with every limit a key can carry (rpm, tpm, parallel, budget), made through
/// the management API as an operator would.
async fn virtual_key(gw: &str) -> String {
    let body = r#"{"rpm_limit":1000000,"tpm_limit":1000000000,"max_parallel_requests":1000,"max_budget":1000000}"#;
    let mut c = Client::new(gw, "/key/generate", body, Some("sk-master")).await;
    assert_eq!(c.once().await, 200, "{}", String::from_utf8_lossy(&c.buf));
    let text = String::from_utf8_lossy(&c.buf);
    let at = text.find("\"key\":\"").unwrap() + 7;
    text[at..at + text[at..].find('"').unwrap()].to_owned()
}

/// Run `check` on a current-thread runtime (the client, the mock and the store's writer share
/// it; sluice's worker has its own thread).
fn run<F: std::future::Future<Output = ()>>(check: F) {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
        .block_on(check);
}

fn report(path: &str, added: f64, direct: f64, target: f64) {
    println!("{path}: {added:.1} allocations per request added by sluice (mock direct: {direct:.1}); target ≤ {target}");
    assert!(
        added <= target,
        "{path}: sluice allocates {added:.1} times per request, over its target of {target}: \
         find the new allocation (or lower nothing and raise the target with the reason)"
    );
}

/// Targets: the counts measured when each was set (2026-11-26: 37.0, 41.2–41.3, 83.9–95.5),
/// rounded up. The keyed path varies by a few allocations per request from run to run: the
/// spend writer allocates per batch of records, and where batches fall moves with timing.
/// 2026-11-29: chat 39.0–39.1, chat-stream 44.9 with LiteLLM's `x-litellm-*` headers beside sluice's (issue 36):
/// their values are shared or static, the one new allocation is the header map's growth.
/// 2026-11-30: chat 30.0, chat-stream 35.0, virtual key 64.9–77.4 with sluice's own HTTP/1.1
/// client to plain-http upstreams (it was 39.0, 44.9 and 74.6–95.5 over hyper-util's; the one
/// allocation the own client adds is its boxed answer future, as hyper-util's was boxed too).
/// Then chat 31.0, chat-stream 35.0 on sluice's own HTTP/1.1 server connection, with requests
/// and known-length answers copied out of the connections' read buffers (the request in one
/// allocation, an answer's head and body in one each) so that every read buffer is reused for
/// good: sharing them saved those allocations but churned whole allocator pages under
/// concurrency (a `madvise` per ~4 requests at c=64, and 20 % fewer requests per second).
const CHAT_TARGET: f64 = 32.0;
const STREAM_TARGET: f64 = 36.0;
const VIRTUAL_KEY_TARGET: f64 = 100.0;
/// Heap bytes a held stream keeps in sluice, in the test build (issue 44). 2026-11-30: 62,442 to
/// 62,510 in four runs over hyper-util's client (by size class: about 35 KB in allocations of
/// 8–16 KB and 16 KB in one of 16–32 KB, the read and write buffers of the client's connection
/// and the upstream's); 31,997–32,892 over sluice's own HTTP/1.1 client, which keeps no task,
/// channel or buffer for a stream that waits. Most of the rest was hyper's server connection
/// (its 16 KiB read and 8 KiB write buffers): 15,120 on sluice's own server connection, which
/// keeps a 4 KiB read buffer and the answer head's.
const HELD_STREAM_TARGET: f64 = 18_000.0;

/// One test, the paths one after another: the counter is the whole process's, so nothing else
/// may run while a path is measured.
#[test]
fn allocations_per_proxied_request() {
    run(async {
        let (chat, direct) = added("", None, &chat_body(false)).await;
        report("chat", chat, direct, CHAT_TARGET);
        let (stream, direct) = added("", None, &chat_body(true)).await;
        report("chat-stream", stream, direct, STREAM_TARGET);
        let (keyed, direct) = added(
            "general_settings:\n  master_key: sk-master\n",
            Some("virtual"),
            &chat_body(false),
        )
        .await;
        report("chat, virtual key", keyed, direct, VIRTUAL_KEY_TARGET);
        // What a held stream keeps on the heap in sluice (issue 44): through the gateway less
        // straight to the mock.
        let mock = mock().await;
        let yaml = format!(
            "model_list:\n  - model_name: bench\n    litellm_params: {{model: openai/bench, api_base: \"http://{mock}/v1\", api_key: sk-mock}}\n"
        );
        let gw = gateway(&yaml).await;
        let direct = bytes_per_held_stream(&mock, Some("sk-mock")).await;
        let through = bytes_per_held_stream(&gw, None).await;
        let added = through - direct;
        println!(
            "held stream: {added:.0} heap bytes per stream held open by sluice ({HELD} streams; \
             mock direct: {direct:.0}); target ≤ {HELD_STREAM_TARGET}"
        );
        assert!(
            added <= HELD_STREAM_TARGET,
            "a held stream keeps {added:.0} bytes of heap in sluice, over its target of \
             {HELD_STREAM_TARGET}: find what each stream now holds"
        );
    });
}
