//! A real Redis for tests: `SLUICE_TEST_REDIS_URL` when the test script started one, else a
//! throwaway `redis-server` on a free loopback port. Without either, a test is skipped loudly
//! and countably (`sluice_store::testing::skip`), except under CI (`CI=true`), where it fails.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A Redis to talk to; stops the server it started when dropped.
pub struct TestRedis {
    /// `redis://127.0.0.1:PORT`.
    pub url: String,
    child: Option<Child>,
}

impl Drop for TestRedis {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(0)
}

/// A Redis, or `None` (after saying why) when this machine has none and CI is not set.
pub fn redis() -> Option<TestRedis> {
    if let Ok(url) = std::env::var("SLUICE_TEST_REDIS_URL") {
        return Some(TestRedis { url, child: None });
    }
    let port = free_port();
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .args(["--appendonly", "no"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn();
    match child {
        Ok(child) => {
            let deadline = Instant::now() + Duration::from_secs(5);
            while Instant::now() < deadline {
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            Some(TestRedis {
                url: format!("redis://127.0.0.1:{port}"),
                child: Some(child),
            })
        }
        Err(e) => {
            sluice_store::testing::skip(
                "Redis",
                &format!("set SLUICE_TEST_REDIS_URL or install redis-server: {e}"),
            );
            None
        }
    }
}

/// A fleet on `url`, once it is connected.
pub async fn up(url: &str) -> std::sync::Arc<super::Fleet> {
    up_on(&sluice_core::RedisTarget::Single(sluice_core::Secret::new(url))).await
}

/// A fleet on `target`, once it is connected.
pub async fn up_on(target: &sluice_core::RedisTarget) -> std::sync::Arc<super::Fleet> {
    let f = super::Fleet::start(target).unwrap();
    for _ in 0..200 {
        if f.is_up() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(f.is_up(), "redis reachable");
    f
}
