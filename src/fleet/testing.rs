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
    up_on(&sluice_core::RedisTarget::Single(sluice_core::Secret::new(
        url,
    )))
    .await
}

/// A fleet on `target`, once it is connected: every limited request asks Redis.
pub async fn up_on(target: &sluice_core::RedisTarget) -> std::sync::Arc<super::Fleet> {
    leasing(target, 0.0).await
}

/// A fleet on `target` leasing `lease` of each limit, once it is connected.
pub async fn leasing(
    target: &sluice_core::RedisTarget,
    lease: f64,
) -> std::sync::Arc<super::Fleet> {
    let f = super::Fleet::start(target, lease).unwrap();
    for _ in 0..200 {
        if f.is_up() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(f.is_up(), "redis reachable");
    f
}

/// `host:port,host:port` → nodes.
fn nodes(list: &str) -> Vec<sluice_core::NodeAddress> {
    list.split(',')
        .filter_map(|n| n.trim().rsplit_once(':'))
        .filter_map(|(h, p)| {
            Some(sluice_core::NodeAddress {
                host: h.to_owned(),
                port: p.parse().ok()?,
            })
        })
        .collect()
}

/// The test Redis Cluster of three primaries (`SLUICE_TEST_REDIS_CLUSTER_NODES`, started by
/// scripts/services.sh), or `None` after a skip (a failure under CI).
pub fn cluster() -> Option<sluice_core::RedisTarget> {
    let list =
        sluice_store::testing::required_var("SLUICE_TEST_REDIS_CLUSTER_NODES", "Redis Cluster")?;
    Some(sluice_core::RedisTarget::Cluster {
        nodes: nodes(&list),
        username: None,
        password: None,
    })
}

/// The test Sentinel set (`SLUICE_TEST_REDIS_SENTINELS`, `..._SENTINEL_SERVICE`) and the
/// control script that kills its primary (`..._SENTINEL_CTL`), or `None` after a skip.
pub fn sentinel() -> Option<(sluice_core::RedisTarget, String)> {
    let list =
        sluice_store::testing::required_var("SLUICE_TEST_REDIS_SENTINELS", "Redis Sentinel")?;
    let service = sluice_store::testing::required_var(
        "SLUICE_TEST_REDIS_SENTINEL_SERVICE",
        "Redis Sentinel",
    )?;
    let ctl =
        sluice_store::testing::required_var("SLUICE_TEST_REDIS_SENTINEL_CTL", "Redis Sentinel")?;
    Some((
        sluice_core::RedisTarget::Sentinel {
            service_name: service,
            sentinels: nodes(&list),
            sentinel_password: None,
            username: None,
            password: None,
        },
        ctl,
    ))
}

/// Run the Sentinel set's control script (`kill-primary`, `ready`); its output.
pub fn sentinel_ctl(ctl: &str, what: &str) -> String {
    let out = Command::new(ctl).arg(what).output().unwrap();
    assert!(
        out.status.success(),
        "{ctl} {what}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// The same key as two instances see it: same id and limits, separate local counters.
pub fn key(id: &str, limits: sluice_core::limits::Limits) -> sluice_core::limits::Subject {
    sluice_core::limits::Subject {
        kind: sluice_core::limits::SubjectKind::Key,
        scope: sluice_core::limits::Scope::All,
        limits: std::sync::Arc::new(limits),
        counters: std::sync::Arc::new(sluice_core::limits::Counters::new(id.into())),
    }
}
