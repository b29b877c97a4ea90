//! Child processes the benchmark measures: `sluice mock` as the upstream and `sluice serve` as
//! the gateway, each from this same binary, on ephemeral loopback ports.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::BenchError;

/// A running child that is killed when dropped.
#[derive(Debug)]
pub struct Spawned {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its pid, for `/proc` readings.
    pub pid: u32,
    /// How to stop it and its children first (nginx's master, killed, would leave its workers
    /// running); the child is killed after it either way.
    stop: Option<Command>,
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.as_mut() {
            let _ = stop.stdin(Stdio::null()).stderr(Stdio::null()).status();
            let deadline = Instant::now() + Duration::from_secs(3);
            while Instant::now() < deadline && matches!(self.child.try_wait(), Ok(None)) {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Start `sluice <args…> --port 0 --ready-file F` and wait until it listens.
pub fn start(
    name: &str,
    args: &[String],
    env: &[(&str, &str)],
    dir: &Path,
) -> Result<Spawned, BenchError> {
    let exe = std::env::current_exe().map_err(|e| BenchError::Spawn(name.into(), e.to_string()))?;
    let ready: PathBuf = dir.join(format!("{name}.addr"));
    let _ = std::fs::remove_file(&ready);
    let mut cmd = Command::new(exe);
    cmd.args(args)
        .args(["--port", "0", "--ready-file"])
        .arg(&ready);
    for (k, v) in env {
        cmd.env(k, v);
    }
    launch(name, cmd, dir, || {
        std::fs::read_to_string(&ready)
            .ok()
            .and_then(|text| text.trim().parse().ok())
    })
}

/// Start another program (the nginx floor) that was told to listen on `addr`, and wait until
/// it accepts connections there: such programs write no ready file.
/// `stop` is run when the program is dropped, before it is killed.
pub fn start_listening(
    name: &str,
    cmd: Command,
    stop: Command,
    addr: SocketAddr,
    dir: &Path,
) -> Result<Spawned, BenchError> {
    let mut spawned = launch(name, cmd, dir, || {
        std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(100))
            .ok()
            .map(|_| addr)
    })?;
    spawned.stop = Some(stop);
    Ok(spawned)
}

/// Spawn `cmd` (stderr to `<name>.log` in `dir`) and poll `listening` until it gives the
/// address, the child exits, or 30 s pass.
fn launch(
    name: &str,
    mut cmd: Command,
    dir: &Path,
    mut listening: impl FnMut() -> Option<SocketAddr>,
) -> Result<Spawned, BenchError> {
    let log_path = dir.join(format!("{name}.log"));
    let log = std::fs::File::create(&log_path)
        .map_err(|e| BenchError::Spawn(name.into(), e.to_string()))?;
    cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(log);
    let child = cmd
        .spawn()
        .map_err(|e| BenchError::Spawn(name.into(), e.to_string()))?;
    let pid = child.id();
    let mut spawned = Spawned {
        child,
        addr: SocketAddr::from(([127, 0, 0, 1], 0)),
        pid,
        stop: None,
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(addr) = listening() {
            spawned.addr = addr;
            return Ok(spawned);
        }
        if let Ok(Some(status)) = spawned.child.try_wait() {
            return Err(BenchError::Spawn(
                name.into(),
                format!("exited with {status}; see {}", log_path.display()),
            ));
        }
        if Instant::now() > deadline {
            return Err(BenchError::Spawn(
                name.into(),
                "did not start within 30 s".into(),
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The gateway config the benchmark runs sluice with: the measured models on the mock, one
/// slow model for the held-streams test, and filler groups up to `models` in all (real configs
/// have dozens of models; memory at rest is measured with them). `h2c`: sluice speaks HTTP/2
/// with prior knowledge to the mocks (which accept it on the same port as HTTP/1.1).
pub fn gateway_config(mock: &str, slow_mock: Option<&str>, models: usize, h2c: bool) -> String {
    let mut y = String::from("# Written by `sluice bench`.\nmodel_list:\n");
    let wire = if h2c {
        "      http2_prior_knowledge: true\n"
    } else {
        ""
    };
    let mut entry = |name: &str, base: &str| {
        y.push_str(&format!(
            "  - model_name: {name}\n    litellm_params:\n      model: openai/{name}\n      api_base: {base}/v1\n      api_key: sk-mock\n{wire}    model_info:\n      base_model: gpt-4o-mini\n"
        ));
    };
    entry("bench", mock);
    entry("bench-embed", mock);
    let mut n = 2;
    if let Some(slow) = slow_mock {
        entry("bench-slow", slow);
        n += 1;
    }
    for i in n..models.max(n) {
        entry(&format!("filler-{i}"), mock);
    }
    y
}

/// The lines of `litellm_settings` that turn the response cache on for the requests that ask
/// (`mode: default_off`), so that every other workload runs as without a cache.
pub const CACHE_SETTINGS: &str = "  cache: true\n  cache_params: {mode: default_off}\n";

/// The PII guardrail the `chat-pii` workloads name, as a user would set it up: the personal
/// data sluice detects masked before the upstream, the answer checked (`post_call`) and the
/// caller's values given back in it (`output_parse_pii`). Not `default_on`, so the other
/// workloads of the same run are unguarded.
pub const PII_GUARDRAIL: &str = "guardrails:
  - guardrail_name: pii
    litellm_params:
      guardrail: litellm_content_filter
      mode: [pre_call, post_call]
      output_parse_pii: true
      pii_entities_config: {EMAIL_ADDRESS: MASK, PHONE_NUMBER: MASK, CREDIT_CARD: MASK, IBAN_CODE: MASK, US_SSN: MASK, IP_ADDRESS: MASK}
";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pii_guardrail_config_loads() {
        let mut yaml = gateway_config("http://127.0.0.1:1", None, 2, false);
        yaml.push_str(PII_GUARDRAIL);
        let env = std::collections::HashMap::new();
        let loaded = sluice_config::load_str(&yaml, &env).unwrap();
        assert_eq!(loaded.config.guardrails.len(), 1);
    }

    #[test]
    fn bench_config_loads_with_the_requested_model_count() {
        let yaml = gateway_config("http://127.0.0.1:1", Some("http://127.0.0.1:2"), 50, false);
        let env = std::collections::HashMap::new();
        let loaded = sluice_config::load_str(&yaml, &env).unwrap();
        assert_eq!(loaded.config.deployments.len(), 50);
        assert_eq!(loaded.config.deployments[2].model_name, "bench-slow");
        let negotiated = sluice_net::UpstreamHttp::Negotiate;
        assert!(loaded
            .config
            .deployments
            .iter()
            .all(|d| d.upstream.connect.http == negotiated));

        let yaml = gateway_config("http://127.0.0.1:1", Some("http://127.0.0.1:2"), 3, true);
        let loaded = sluice_config::load_str(&yaml, &env).unwrap();
        assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
        let h2c = sluice_net::UpstreamHttp::PriorKnowledge;
        assert!(loaded
            .config
            .deployments
            .iter()
            .all(|d| d.upstream.connect.http == h2c));
    }
}
