//! The floor: Debian's nginx as a plain keep-alive reverse proxy to the same mock, measured in
//! the same run as sluice. No gateway can cost less than moving the request at all, so sluice's
//! figures are read as ratios to what a mature proxy pays on the same machine at the same
//! moment (issue: "as cheap as nginx").

use std::net::{SocketAddr, TcpListener};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use super::spawn::{self, Spawned};
use super::BenchError;

/// The floor's target name in reports.
pub const NAME: &str = super::report::FLOOR;

/// Where nginx is: the path given, else `nginx` on `PATH`, else Debian's `/usr/sbin/nginx`
/// (root's `PATH` has `/usr/sbin`, a user's often does not).
pub fn find(given: Option<&Path>) -> Option<PathBuf> {
    if let Some(p) = given {
        return Some(p.to_owned());
    }
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("nginx"))
            .find(|p| p.is_file())
    });
    on_path.or_else(|| {
        let debian = PathBuf::from("/usr/sbin/nginx");
        debian.is_file().then_some(debian)
    })
}

/// The nginx configuration: what an operator would write for a fast proxy in front of a
/// streaming API — workers = the gateway's workers, upstream keep-alive, no buffering of
/// requests or answers (a stream's chunks leave as they arrive), no access log (sluice's
/// request log is off in the benchmark too). Temporary files and the pid file stay in `dir`.
pub fn config(upstream: &str, listen: SocketAddr, workers: usize, dir: &Path) -> String {
    let d = dir.display();
    // As root, nginx's workers would switch to `nobody`, who cannot write in the run's folder.
    let user = match std::fs::metadata("/proc/self") {
        Ok(m) if m.uid() == 0 => "user root;\n",
        _ => "",
    };
    format!(
        "# Written by `sluice bench`: the floor, nginx as a keep-alive reverse proxy to the mock.
{user}daemon off;
master_process on;
worker_processes {workers};
pid {d}/nginx.pid;
error_log {d}/nginx-error.log warn;
events {{
  worker_connections 8192;
}}
http {{
  access_log off;
  client_body_temp_path {d}/nginx-tmp/body;
  proxy_temp_path {d}/nginx-tmp/proxy;
  fastcgi_temp_path {d}/nginx-tmp/fastcgi;
  uwsgi_temp_path {d}/nginx-tmp/uwsgi;
  scgi_temp_path {d}/nginx-tmp/scgi;
  client_max_body_size 64m;
  client_body_buffer_size 1m;
  keepalive_requests 10000000;
  keepalive_timeout 75s;
  upstream mock {{
    server {upstream};
    keepalive 512;
    keepalive_requests 10000000;
  }}
  server {{
    listen {listen};
    location / {{
      proxy_pass http://mock;
      proxy_http_version 1.1;
      proxy_set_header Connection \"\";
      proxy_buffering off;
      proxy_request_buffering off;
    }}
  }}
}}
"
    )
}

/// Start nginx in front of the mock at `mock_base` (`http://host:port`) with `workers` worker
/// processes; the returned process is the master, whose tree holds the workers' CPU and memory.
pub fn start(
    nginx: &Path,
    mock_base: &str,
    workers: usize,
    dir: &Path,
) -> Result<Spawned, BenchError> {
    let fail = |why: String| BenchError::Spawn(NAME.into(), why);
    let upstream = mock_base.strip_prefix("http://").ok_or_else(|| {
        fail(format!(
            "the floor needs a plain-http mock, not {mock_base}"
        ))
    })?;
    // A free loopback port: nginx writes no ready file, so the run picks its port.
    let listen = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| fail(e.to_string()))?;
    std::fs::create_dir_all(dir.join("nginx-tmp")).map_err(|e| fail(e.to_string()))?;
    let conf = dir.join("nginx.conf");
    std::fs::write(&conf, config(upstream, listen, workers, dir)).map_err(|e| {
        BenchError::Write {
            path: conf.clone(),
            reason: e.to_string(),
        }
    })?;
    let command = || {
        let mut cmd = Command::new(nginx);
        cmd.arg("-p")
            .arg(dir)
            .arg("-e")
            .arg(dir.join("nginx-error.log"))
            .arg("-c")
            .arg(&conf);
        cmd
    };
    // `nginx -s stop` signals the master through the pid file; it takes its workers with it.
    let mut stop = command();
    stop.args(["-s", "stop"]);
    spawn::start_listening(NAME, command(), stop, listen, dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_proxies_to_the_mock_without_buffering() {
        let listen: SocketAddr = "127.0.0.1:8181".parse().unwrap();
        let c = config("127.0.0.1:9000", listen, 2, Path::new("/tmp/run"));
        assert!(c.contains("server 127.0.0.1:9000;"));
        assert!(c.contains("listen 127.0.0.1:8181;"));
        assert!(c.contains("worker_processes 2;"));
        assert!(c.contains("proxy_buffering off;"));
        assert!(c.contains("proxy_request_buffering off;"));
        assert!(c.contains("proxy_set_header Connection \"\";"));
        assert!(c.contains("pid /tmp/run/nginx.pid;"));
    }

    #[test]
    fn a_given_path_wins() {
        let p = Path::new("/opt/nginx/sbin/nginx");
        assert_eq!(find(Some(p)).as_deref(), Some(p));
    }
}
