//! `sluice healthcheck`: ask a running gateway whether it is alive. The release image is
//! `FROM scratch` (one static binary, no shell, no curl), so its `HEALTHCHECK` and any exec
//! probe run the binary itself. One blocking HTTP/1.1 GET over a plain TCP socket: no runtime,
//! no TLS, no new dependency; sluice's health routes are plain HTTP on the pod or container.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use http::Uri;

/// Why a health check failed; each is a one-line message for the container's health log.
#[derive(Debug, thiserror::Error)]
pub enum HealthError {
    /// The URL is not `http://host[:port]/path`.
    #[error("bad URL {0:?}: expected http://host[:port]/path")]
    BadUrl(String),
    /// The host name resolved to no address.
    #[error("{0}: no address")]
    NoAddress(String),
    /// No connection, no answer in time, or the connection broke.
    #[error("{0}: {1}")]
    Io(String, std::io::Error),
    /// The answer did not start with an HTTP status line.
    #[error("{0}: not an HTTP answer")]
    NotHttp(String),
    /// The gateway answered, but not with a 2xx.
    #[error("{0}: answered {1}")]
    Status(String, u16),
}

/// The URL `sluice healthcheck` asks when given none: the liveness route on the address
/// `serve` listens on, as read from the same `--host`/`--port` (`SLUICE_HOST`/`SLUICE_PORT`).
/// A wildcard listen address is asked on loopback.
pub fn default_url(host: IpAddr, port: u16) -> String {
    let addr = match host {
        IpAddr::V4(v4) if v4.is_unspecified() => SocketAddr::new(Ipv4Addr::LOCALHOST.into(), port),
        IpAddr::V6(v6) if v6.is_unspecified() => SocketAddr::new(Ipv6Addr::LOCALHOST.into(), port),
        ip => SocketAddr::new(ip, port),
    };
    format!("http://{addr}/health/liveliness")
}

/// GET `url` and return its status when it is a 2xx, all within `timeout`.
pub fn check(url: &str, timeout: Duration) -> Result<u16, HealthError> {
    let uri: Uri = url
        .parse()
        .map_err(|_| HealthError::BadUrl(url.to_owned()))?;
    if uri.scheme_str() != Some("http") {
        return Err(HealthError::BadUrl(url.to_owned()));
    }
    let (Some(host), Some(authority)) = (uri.host(), uri.authority()) else {
        return Err(HealthError::BadUrl(url.to_owned()));
    };
    // `[::1]` in a URL is `::1` to the resolver.
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = uri.port_u16().unwrap_or(80);
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let io = |e| HealthError::Io(url.to_owned(), e);
    let deadline = Instant::now() + timeout;
    let addrs = (host, port).to_socket_addrs().map_err(io)?;
    let mut last = HealthError::NoAddress(url.to_owned());
    for addr in addrs {
        match ask(addr, authority.as_str(), path, deadline) {
            Ok(status) if (200..300).contains(&status) => return Ok(status),
            Ok(status) => return Err(HealthError::Status(url.to_owned(), status)),
            Err(Answer::NotHttp) => return Err(HealthError::NotHttp(url.to_owned())),
            Err(Answer::Io(e)) => last = io(e),
        }
    }
    Err(last)
}

/// What went wrong with one address.
enum Answer {
    Io(std::io::Error),
    NotHttp,
}

impl From<std::io::Error> for Answer {
    fn from(e: std::io::Error) -> Self {
        Self::Io(e)
    }
}

/// One request to one address; the status code of its answer.
fn ask(addr: SocketAddr, authority: &str, path: &str, deadline: Instant) -> Result<u16, Answer> {
    let left = || {
        deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::TimedOut))
    };
    let mut stream = TcpStream::connect_timeout(&addr, left()?)?;
    stream.set_write_timeout(Some(left()?))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nUser-Agent: sluice-healthcheck\r\nConnection: close\r\n\r\n"
    )?;
    // The status line is all we need: `HTTP/1.1 200 OK\r\n`.
    let mut head = [0u8; 64];
    let mut len = 0;
    while len < head.len() && !head[..len].contains(&b'\n') {
        stream.set_read_timeout(Some(left()?))?;
        match stream.read(&mut head[len..])? {
            0 => break,
            n => len += n,
        }
    }
    status_code(&head[..len]).ok_or(Answer::NotHttp)
}

/// The status code of an HTTP/1.x status line.
fn status_code(head: &[u8]) -> Option<u16> {
    let line = std::str::from_utf8(head.split(|&b| b == b'\n').next()?).ok()?;
    let mut parts = line.split_ascii_whitespace();
    parts.next()?.strip_prefix("HTTP/1.")?;
    let code = parts.next()?;
    (code.len() == 3).then_some(())?;
    code.parse().ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use std::net::TcpListener;

    /// A one-shot server that answers the first connection with `answer` and returns the
    /// request it read.
    fn serve_once(answer: &'static [u8]) -> (String, std::thread::JoinHandle<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let handle = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut req = Vec::new();
            let mut buf = [0u8; 512];
            while !req.ends_with(b"\r\n\r\n") {
                let n = s.read(&mut buf).unwrap();
                if n == 0 {
                    break;
                }
                req.extend_from_slice(&buf[..n]);
            }
            s.write_all(answer).unwrap();
            String::from_utf8(req).unwrap()
        });
        (format!("http://{addr}/health/liveliness"), handle)
    }

    #[test]
    fn a_2xx_is_healthy_and_the_request_is_a_plain_get() {
        let (url, server) = serve_once(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
        assert_eq!(check(&url, Duration::from_secs(5)).unwrap(), 200);
        let req = server.join().unwrap();
        assert!(
            req.starts_with("GET /health/liveliness HTTP/1.1\r\n"),
            "{req}"
        );
        assert!(req.contains("\r\nHost: 127.0.0.1:"), "{req}");
    }

    #[test]
    fn another_status_is_unhealthy() {
        let (url, server) = serve_once(b"HTTP/1.1 503 Service Unavailable\r\n\r\n");
        let err = check(&url, Duration::from_secs(5)).unwrap_err();
        assert!(matches!(err, HealthError::Status(_, 503)), "{err}");
        server.join().unwrap();
    }

    #[test]
    fn garbage_is_not_http() {
        let (url, server) = serve_once(b"SSH-2.0-OpenSSH\r\n");
        let err = check(&url, Duration::from_secs(5)).unwrap_err();
        assert!(matches!(err, HealthError::NotHttp(_)), "{err}");
        server.join().unwrap();
    }

    #[test]
    fn nobody_listening_is_an_io_error() {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}/health/liveliness");
        let err = check(&url, Duration::from_secs(5)).unwrap_err();
        assert!(matches!(err, HealthError::Io(..)), "{err}");
    }

    #[test]
    fn only_plain_http_urls() {
        for url in ["https://127.0.0.1/x", "127.0.0.1:4000", "http:///x"] {
            let err = check(url, Duration::from_secs(1)).unwrap_err();
            assert!(matches!(err, HealthError::BadUrl(_)), "{url}: {err}");
        }
    }

    #[test]
    fn the_default_url_asks_loopback_for_a_wildcard_listener() {
        let any4 = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
        let any6 = IpAddr::V6(Ipv6Addr::UNSPECIFIED);
        assert_eq!(
            default_url(any4, 4000),
            "http://127.0.0.1:4000/health/liveliness"
        );
        assert_eq!(default_url(any6, 80), "http://[::1]:80/health/liveliness");
        let ip: IpAddr = "10.1.2.3".parse().unwrap();
        assert_eq!(default_url(ip, 9), "http://10.1.2.3:9/health/liveliness");
    }

    #[test]
    fn status_lines() {
        assert_eq!(status_code(b"HTTP/1.1 204 No Content\r\n"), Some(204));
        assert_eq!(status_code(b"HTTP/1.0 200\r\n"), Some(200));
        assert_eq!(status_code(b"HTTP/2 200\r\n"), None);
        assert_eq!(status_code(b"HTTP/1.1 20\r\n"), None);
        assert_eq!(status_code(b""), None);
    }
}
