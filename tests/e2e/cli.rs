//! The real binary: `--version`, `check-config`, and `serve` with graceful shutdown.
use crate::common::{eventually, ready_addr, serve_binary, until_in_flight, Served, PATIENCE};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_sluice");

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn temp_file(name: &str, text: &str) -> PathBuf {
    let p = crate::common::temp_dir().join(name);
    std::fs::File::create(&p)
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    p
}

#[test]
fn version_names_the_commit() {
    let out = Command::new(BIN).arg("--version").output().unwrap();
    assert!(out.status.success());
    let commit = env!("SLUICE_GIT_COMMIT");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("sluice {} ({commit})", env!("CARGO_PKG_VERSION"))
    );
    // Built from a git checkout (as the tests are), the commit is HEAD's, not "unknown".
    let head = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(root())
        .output();
    if let Some(head) = head.ok().filter(|h| h.status.success()) {
        assert_eq!(commit, String::from_utf8_lossy(&head.stdout).trim());
    }
}

/// `sluice healthcheck` (the image's HEALTHCHECK) against a real gateway: healthy on its
/// liveness route, found through the same SLUICE_PORT `serve` reads; unhealthy when nothing
/// listens or the route is not 2xx.
#[test]
fn healthcheck_asks_the_liveness_route() {
    let mut served = serve(SLOW_STREAM, &[]);
    let port = served.addr.rsplit(':').next().unwrap().to_owned();
    let out = Command::new(BIN)
        .arg("healthcheck")
        .env("SLUICE_PORT", &port)
        .env("SLUICE_HOST", "0.0.0.0")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout.trim(),
        format!("healthy: http://127.0.0.1:{port}/health/liveliness answered 200")
    );
    // A route that needs the master key answers 401: unhealthy.
    let out = Command::new(BIN)
        .args(["healthcheck", "--url"])
        .arg(format!("http://{}/health", served.addr))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("answered 401"));
    sigterm(&served.child);
    assert_eq!(served.child.wait().unwrap().code(), Some(0));
    let out = Command::new(BIN)
        .args(["healthcheck", "--timeout-secs", "2", "--port", &port])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("unhealthy: "));
}

#[test]
fn check_config_lists_models_with_secrets_masked() {
    let out = Command::new(BIN)
        .args(["check-config"])
        .arg(root().join("examples/quickstart.yaml"))
        .env("OPENAI_API_KEY", "sk-proj-very-secret-openai-key")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("mock-gpt"), "{stdout}");
    assert!(stdout.contains("gpt-4o-mini"), "{stdout}");
    assert!(!stdout.contains("very-secret") && !stderr.contains("very-secret"));
}

#[test]
fn check_config_names_the_bad_field() {
    let bad = temp_file(
        "bad.yaml",
        "model_list:\n  - model_name: x\n    litellm_params:\n      model: opnai/gpt-4o\n",
    );
    let out = Command::new(BIN)
        .arg("check-config")
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(r#"model_list[0].litellm_params.model: unknown provider "opnai" (did you mean "openai"?)"#),
        "{stderr}"
    );
}

fn serve(config: &str, extra: &[&str]) -> Served {
    serve_binary(config, extra).unwrap()
}

fn sigterm(child: &Child) {
    let ok = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

const SLOW_STREAM: &str = r#"
model_list:
  - model_name: slow
    litellm_params:
      model: mock/slow
      mock_chunks: 10
      mock_chunk_interval_ms: 100
general_settings:
  master_key: sk-cli-master-key
"#;

#[tokio::test]
async fn graceful_shutdown_lets_streams_finish() {
    let mut served = serve(SLOW_STREAM, &["--log-format", "json"]);
    let url = format!("http://{}/v1/chat/completions", served.addr);
    let stream = tokio::spawn(async move {
        crate::common::send(
            "POST",
            &url,
            r#"{"model":"slow","stream":true,"messages":[]}"#,
            &[("authorization", "Bearer sk-cli-master-key")],
        )
        .await
    });
    // Stopped while the stream (ten chunks, 100 ms apart) is under way.
    until_in_flight(&served.addr, "sk-cli-master-key", 1).await;
    sigterm(&served.child);
    let answer = stream.await.unwrap();
    assert_eq!(answer.status, 200);
    assert!(!answer.body_error, "stream was cut by shutdown");
    assert_eq!(answer.sse_data().last().map(String::as_str), Some("[DONE]"));
    let status = served.child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    let log = std::fs::read_to_string(&served.log).unwrap();
    assert!(!log.contains("sk-cli-master-key"), "master key in logs");
    // The stream's line (the test's own reads of /metrics aside).
    let request_lines: Vec<serde_json::Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|v| v["message"] == "request" && v["route"] != "/metrics")
        .collect();
    assert_eq!(request_lines.len(), 1, "{log}");
    assert_eq!(request_lines[0]["model"], "slow");
    assert_eq!(request_lines[0]["outcome"], "complete");
}

#[tokio::test]
async fn refuses_new_connections_after_sigterm() {
    let mut served = serve(SLOW_STREAM, &[]);
    sigterm(&served.child);
    let status = served.child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(std::net::TcpStream::connect(&served.addr).is_err());
}

/// The signal handlers are in place before the ready file is written: a SIGTERM at once (a
/// container stopped right after it started) ends the process cleanly (exit 0), never by the
/// signal's default action. Before they were installed up front, 5 of 40 gateways signalled
/// this way here died by the signal. `sluice mock` shares the start-up order and stops without
/// the gateway's wait for its last records, so it can be started many times cheaply.
#[test]
fn sigterm_right_after_start_exits_0() {
    let dir = crate::common::temp_dir();
    let ready = dir.join("mock.ready");
    for _ in 0..20 {
        let _ = std::fs::remove_file(&ready);
        let mut child = Command::new(BIN)
            .args(["mock", "--port", "0", "--ready-file"])
            .arg(&ready)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        ready_addr(&ready, "mock did not start");
        sigterm(&child);
        let status = child.wait().unwrap();
        assert_eq!(status.code(), Some(0), "{status:?}");
    }
}

/// Thread-per-core serving: every worker thread has its own upstream pool and accept loop,
/// and they all see a SIGHUP reload.
#[tokio::test]
async fn workers_proxy_over_their_own_pools_and_all_see_a_reload() {
    let mock = crate::common::mock_server(sluice_mock::MockSettings::default()).await;
    let config = |name: &str| {
        format!(
            "model_list:\n  - model_name: {name}\n    litellm_params: {{model: openai/m, api_base: \"{}\", api_key: sk-up}}\n",
            mock.base()
        )
    };
    let mut served = serve(&config("before"), &["--workers", "3"]);
    let url = format!("http://{}/v1/chat/completions", served.addr);
    let ask = |model: &'static str| {
        let url = url.clone();
        async move {
            let body =
                format!(r#"{{"model":"{model}","messages":[{{"role":"user","content":"hi"}}]}}"#);
            crate::common::send("POST", &url, body, &[]).await.status
        }
    };
    // Each `send` opens its own connection, so the kernel spreads them over the workers.
    let first = futures_util::future::join_all((0..24).map(|_| ask("before"))).await;
    assert!(first.iter().all(|s| *s == 200), "{first:?}");

    std::fs::write(&served.cfg, config("after")).unwrap();
    let ok = Command::new("kill")
        .args(["-HUP", &served.child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    assert!(
        eventually(PATIENCE, || async { ask("after").await == 200 }).await,
        "reload not seen"
    );
    let after = futures_util::future::join_all((0..24).map(|_| ask("after"))).await;
    assert!(after.iter().all(|s| *s == 200), "{after:?}");
    let gone = futures_util::future::join_all((0..24).map(|_| ask("before"))).await;
    assert!(gone.iter().all(|s| *s == 404), "{gone:?}");

    sigterm(&served.child);
    assert_eq!(served.child.wait().unwrap().code(), Some(0));
}

/// Count the chunks of a chunked HTTP/1.1 response and return them with the events' text.
fn read_chunked(raw: &[u8]) -> (usize, String) {
    let text = String::from_utf8_lossy(raw);
    let (_, mut body) = text.split_once("\r\n\r\n").expect("a response head");
    let (mut chunks, mut data) = (0, String::new());
    loop {
        let (size, rest) = body.split_once("\r\n").expect("a chunk size line");
        let size = usize::from_str_radix(size, 16).expect("a hex chunk size");
        if size == 0 {
            return (chunks, data);
        }
        chunks += 1;
        data.push_str(&rest[..size]);
        body = &rest[size + 2..];
    }
}

/// SSE frames that reach sluice together leave in one write: the client gets the first frame
/// on its own (time to first byte) and the rest in one chunk, not one chunk per frame.
#[tokio::test]
async fn stream_frames_ready_together_reach_the_client_in_one_chunk() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mock = crate::common::mock_server(sluice_mock::MockSettings::default()).await;
    let config = format!(
        "model_list:\n  - model_name: m\n    litellm_params: {{model: openai/m, api_base: \"{}\", api_key: sk-up}}\n",
        mock.base()
    );
    let mut served = serve(&config, &["--workers", "1"]);
    let body = r#"{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}"#;
    let mut conn = tokio::net::TcpStream::connect(&served.addr).await.unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    conn.read_to_end(&mut raw).await.unwrap();
    let (chunks, data) = read_chunked(&raw);
    let events = data.matches("\n\n").count();
    assert!(data.ends_with("data: [DONE]\n\n"), "{data}");
    assert!(events >= 5, "{data}");
    assert!(
        chunks <= 3,
        "{events} events came in {chunks} chunks (one write each)"
    );
    sigterm(&served.child);
    assert_eq!(served.child.wait().unwrap().code(), Some(0));
}

#[test]
fn bench_measures_direct_and_through_sluice() {
    let out = std::env::temp_dir().join(format!("sluice-bench-{}", std::process::id()));
    let run = Command::new(BIN)
        .args([
            "bench",
            "--workloads",
            "chat,chat-stream,embeddings",
            "--sizes",
            "1k",
            "--concurrency",
            "1,4",
            "--requests",
            "30",
            "--warmup",
            "5",
            "--hold-streams",
            "20",
            "--models",
            "10",
            "--quiet",
            "--out",
        ])
        .arg(&out)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert!(
        run.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );
    assert!(stdout.contains("held 20 concurrent streams"), "{stdout}");
    let dir = std::fs::read_dir(&out)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let report: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("report.json")).unwrap()).unwrap();
    let rows = report["rows"].as_array().unwrap();
    // The floor (nginx) runs whenever it is installed; scripts/test.sh installs it.
    let floor = std::path::Path::new("/usr/sbin/nginx").exists()
        || std::env::var_os("PATH")
            .is_some_and(|p| std::env::split_paths(&p).any(|d| d.join("nginx").is_file()));
    let targets = if floor { 3 } else { 2 };
    assert_eq!(rows.len(), 3 * 2 * targets, "workloads × levels × targets");
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    if floor {
        assert!(rows.iter().any(|r| r["target"] == "nginx"), "{report}");
        assert!(md.contains("## sluice ÷ nginx (the floor)"), "{md}");
        assert!(md.contains("| chat | 1k | 1 |"), "{md}");
    } else {
        assert!(md.contains("Not measured: nginx is not installed"), "{md}");
    }
    for r in rows {
        assert_eq!(r["ok"], 30, "{r}");
        assert!(r["errors"].as_object().unwrap().is_empty(), "{r}");
        if r["target"] != "direct" {
            assert!(r["added_us"]["p50"].is_number(), "{r}");
            assert!(r["cpu_s_per_1k"].is_number());
            assert!(r["rss_peak_mb"].as_f64().unwrap() > 1.0);
        }
        if r["workload"] == "chat-stream" {
            assert!(r["ttfb_us"]["p50"].as_f64().unwrap() > 0.0);
        }
    }
    assert_eq!(report["hold"]["ok"], 20);
    assert!(dir.join("report.md").exists());
    assert!(dir.join("rps-chat-1k.svg").exists());
    assert!(dir.join("added-latency-chat-1k.svg").exists());
    let _ = std::fs::remove_dir_all(&out);
}
