//! A stdio tool server: a child process sluice starts with only its configured environment,
//! speaks JSON-RPC lines with on stdin/stdout, and supervises. A supervisor task starts it,
//! opens the session (`initialize`), serves requests over it until it exits, fails what was
//! waiting, and starts it again after a backoff (doubling from 250 ms to 30 s; reset once a run
//! lasted a minute). Dropping the link stops the supervisor, which kills the child.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::{CancellationToken, DropGuard};

use super::notes::{self, Notes};
use super::{initialize_params, negotiated_version, Reply, UpstreamError};
use crate::jsonrpc::{self, Message};
use crate::settings::StdioServer;

const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A run this long counts as healthy: the next failure starts the backoff again.
const HEALTHY_RUN: Duration = Duration::from_secs(60);
/// Messages waiting to be written to a child's stdin.
const WRITE_QUEUE: usize = 64;

type Waiters = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Reply, UpstreamError>>>>>;
/// Where the progress of each request that asked for it goes, by its id (its token).
type Listeners = Arc<Mutex<HashMap<u64, Notes>>>;

/// One running child: where to write, and who waits for which id.
#[derive(Debug)]
struct Conn {
    tx: mpsc::Sender<String>,
    waiters: Waiters,
    listeners: Listeners,
}

/// sluice's link to one stdio server.
#[derive(Debug)]
pub(super) struct StdioLink {
    conn: watch::Receiver<Option<Arc<Conn>>>,
    _stop: DropGuard,
}

impl StdioLink {
    /// Start the supervisor on the current runtime.
    pub(super) fn start(
        name: &str,
        settings: StdioServer,
        max_bytes: usize,
        timeout: Duration,
    ) -> Self {
        let (tx, rx) = watch::channel(None);
        let stop = CancellationToken::new();
        let supervisor = Supervisor {
            name: name.to_owned(),
            settings,
            max_bytes,
            timeout,
            publish: tx,
        };
        tokio::spawn(supervisor.run(stop.clone()));
        Self {
            conn: rx,
            _stop: stop.drop_guard(),
        }
    }

    /// The running child's connection, waiting for one to be up.
    async fn conn(&self) -> Result<Arc<Conn>, UpstreamError> {
        let mut rx = self.conn.clone();
        let up = rx
            .wait_for(Option::is_some)
            .await
            .map_err(|_| UpstreamError::Unavailable("the supervisor stopped".into()))?;
        up.clone()
            .ok_or_else(|| UpstreamError::Unavailable("not running".into()))
    }

    /// Send request `id` and wait for its answer; its progress (by token) goes to `notes`.
    pub(super) async fn request(
        &self,
        id: u64,
        body: String,
        notes: Option<&Notes>,
    ) -> Result<Reply, UpstreamError> {
        let conn = self.conn().await?;
        let (tx, rx) = oneshot::channel();
        lock(&conn.waiters).insert(id, tx);
        if let Some(n) = notes {
            lock(&conn.listeners).insert(id, n.clone());
        }
        // The waiter leaves the maps however this ends (answered, timed out, dropped).
        let _forget = Forget { conn: &conn, id };
        conn.tx
            .send(body)
            .await
            .map_err(|_| UpstreamError::Unavailable("the process exited".into()))?;
        rx.await
            .map_err(|_| UpstreamError::Unavailable("the process exited".into()))?
    }

    pub(super) async fn notify(&self, body: String) -> Result<(), UpstreamError> {
        let conn = self.conn().await?;
        conn.tx
            .send(body)
            .await
            .map_err(|_| UpstreamError::Unavailable("the process exited".into()))
    }
}

struct Forget<'a> {
    conn: &'a Conn,
    id: u64,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        lock(&self.conn.waiters).remove(&self.id);
        lock(&self.conn.listeners).remove(&self.id);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

struct Supervisor {
    name: String,
    settings: StdioServer,
    max_bytes: usize,
    timeout: Duration,
    publish: watch::Sender<Option<Arc<Conn>>>,
}

impl Supervisor {
    async fn run(self, stop: CancellationToken) {
        let mut backoff = FIRST_BACKOFF;
        loop {
            let started = tokio::time::Instant::now();
            tokio::select! {
                () = stop.cancelled() => return,
                why = self.run_once() => {
                    self.publish.send_replace(None);
                    tracing::warn!(server = %self.name, reason = %why, "MCP stdio server stopped; restarting");
                }
            }
            if started.elapsed() >= HEALTHY_RUN {
                backoff = FIRST_BACKOFF;
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(backoff) => {}
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// Start the child and serve it until it fails; says why it ended. Dropping this future
    /// (shutdown) kills the child.
    async fn run_once(&self) -> String {
        let mut child = match self.spawn() {
            Ok(c) => c,
            Err(e) => return format!("could not start: {e}"),
        };
        let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return "no pipes".into();
        };
        let waiters = Waiters::default();
        let (tx, rx) = mpsc::channel(WRITE_QUEUE);
        let listeners = Listeners::default();
        let conn = Arc::new(Conn {
            tx,
            waiters: Arc::clone(&waiters),
            listeners: Arc::clone(&listeners),
        });
        let ended = tokio::select! {
            status = child.wait() => match status {
                Ok(s) => format!("exited ({s})"),
                Err(e) => format!("wait failed: {e}"),
            },
            why = write_lines(stdin, rx) => why,
            why = read_lines(stdout, &waiters, &listeners, &conn.tx, self.max_bytes) => why,
            why = self.open(&conn) => why,
        };
        // Whoever still waits learns now, not at their timeout.
        for (_, w) in lock(&waiters).drain() {
            let _ = w.send(Err(UpstreamError::Unavailable(ended.clone())));
        }
        ended
    }

    /// Open the session and publish the connection; then wait for ever (the other branches
    /// end the run).
    async fn open(&self, conn: &Arc<Conn>) -> String {
        let (tx, rx) = oneshot::channel();
        lock(&conn.waiters).insert(0, tx);
        let init = jsonrpc::request(0, "initialize", Some(&initialize_params()));
        if conn.tx.send(init).await.is_err() {
            return "stdin closed".into();
        }
        let reply = match tokio::time::timeout(self.timeout, rx).await {
            Ok(Ok(Ok(Reply::Result(r)))) => r,
            Ok(Ok(Ok(Reply::Error(e)))) => return format!("initialize refused: {}", e.get()),
            Ok(Ok(Err(e))) => return e.to_string(),
            Ok(Err(_)) => return "initialize unanswered".into(),
            Err(_) => return format!("initialize not answered within {:?}", self.timeout),
        };
        if let Err(e) = negotiated_version(&reply) {
            return e.to_string();
        }
        let done = jsonrpc::notification("notifications/initialized", None);
        if conn.tx.send(done).await.is_err() {
            return "stdin closed".into();
        }
        tracing::info!(server = %self.name, "MCP stdio server ready");
        self.publish.send_replace(Some(Arc::clone(conn)));
        std::future::pending().await
    }

    fn spawn(&self) -> std::io::Result<Child> {
        let s = &self.settings;
        let mut cmd = Command::new(&s.command);
        cmd.args(&s.args)
            .env_clear()
            .envs(s.env.iter().map(|(k, v)| (k, v.expose())))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true);
        cmd.spawn()
    }
}

async fn write_lines(mut stdin: ChildStdin, mut rx: mpsc::Receiver<String>) -> String {
    while let Some(mut line) = rx.recv().await {
        line.push('\n');
        if let Err(e) = stdin.write_all(line.as_bytes()).await {
            return format!("stdin: {e}");
        }
        if let Err(e) = stdin.flush().await {
            return format!("stdin: {e}");
        }
    }
    "stopped".into()
}

/// Read the child's messages: responses go to their waiters; requests from the server (it
/// may ask its client for sampling or roots) are refused; progress goes to the request whose
/// id is its token, when that request listens; other notifications are dropped (they concern
/// sluice's own session upstream, or no request in particular). A line longer than the
/// bound ends the run.
async fn read_lines(
    stdout: ChildStdout,
    waiters: &Waiters,
    listeners: &Listeners,
    tx: &mpsc::Sender<String>,
    max_bytes: usize,
) -> String {
    let mut reader = BufReader::new(stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        let limit = u64::try_from(max_bytes)
            .unwrap_or(u64::MAX)
            .saturating_add(1);
        let mut bounded = (&mut reader).take(limit);
        match bounded.read_until(b'\n', &mut line).await {
            Ok(0) => return "stdout closed".into(),
            Ok(_) => {}
            Err(e) => return format!("stdout: {e}"),
        }
        if line.len() > max_bytes {
            return format!("a message exceeded {max_bytes} bytes");
        }
        let text = line.trim_ascii();
        if text.is_empty() {
            continue;
        }
        let Some(m) = Message::parse(text) else {
            tracing::debug!("MCP stdio server wrote a line that is not JSON-RPC");
            continue;
        };
        match m.kind() {
            jsonrpc::Kind::Response => {
                let Some(id) = m.id.and_then(|i| i.get().parse::<u64>().ok()) else {
                    continue;
                };
                if let Some(w) = lock(waiters).remove(&id) {
                    let _ = w.send(Reply::of(&m));
                }
            }
            jsonrpc::Kind::Request => {
                let id = m.id.map_or("null", |i| i.get());
                let refusal = jsonrpc::error(
                    id,
                    jsonrpc::code::METHOD_NOT_FOUND,
                    "sluice does not serve client features to tool servers",
                );
                let _ = tx.try_send(refusal);
            }
            jsonrpc::Kind::Notification if m.method == Some(notes::PROGRESS) => {
                let listener = notes::progress_token(&m)
                    .and_then(|token| lock(listeners).get(&token).cloned());
                if let Some(n) = listener {
                    n.offer(text);
                }
            }
            jsonrpc::Kind::Notification | jsonrpc::Kind::Invalid => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    /// A stdio server in a few lines of shell: answers `initialize`, echoes each other
    /// request's method back as its result, and prints its environment's size.
    fn echo_server() -> StdioServer {
        let script = r#"
while IFS= read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9]*\).*/\1/p')
  [ -z "$id" ] && continue
  case "$line" in
    *'"initialize"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"sh","version":"1"}}}\n' "$id" ;;
    *'"die"'*) exit 3 ;;
    *'"work"'*) printf '{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":1}}\n{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":999,"progress":1}}\n{"jsonrpc":"2.0","id":%s,"result":{}}\n' "$id" "$id" ;;
    *) printf '{"jsonrpc":"2.0","id":%s,"result":{"env":"%s"}}\n' "$id" "$(env | grep -c .)" ;;
  esac
done
"#;
        StdioServer {
            command: "sh".into(),
            args: vec!["-c".into(), script.into()],
            env: BTreeMap::from([("ONLY".into(), sluice_core::Secret::new("1"))]),
        }
    }

    #[tokio::test]
    async fn serves_restarts_and_keeps_the_environment_minimal() {
        let link = StdioLink::start("t", echo_server(), 1 << 20, Duration::from_secs(5));
        let body = |id| jsonrpc::request(id, "tools/list", None);
        let Reply::Result(r) = link.request(1, body(1), None).await.unwrap() else {
            panic!("an error");
        };
        // `ONLY` and the few variables sh sets itself (PWD, SHLVL, _), nothing of ours.
        let env: serde_json::Value = serde_json::from_str(r.get()).unwrap();
        let n: u32 = env["env"].as_str().unwrap().parse().unwrap();
        assert!(n <= 4, "the child saw {n} variables");
        // Progress with the request's id as its token reaches the request; other tokens not.
        let (notes, mut rx) = Notes::channel(4);
        let worked = link
            .request(4, jsonrpc::request(4, "work", None), Some(&notes))
            .await;
        assert!(matches!(worked, Ok(Reply::Result(_))), "{worked:?}");
        drop(notes);
        let note = rx.recv().await.unwrap();
        assert!(note.contains(r#""progressToken":4"#), "{note}");
        assert!(rx.recv().await.is_none());
        // It dies: the waiter hears at once, and the supervisor starts it again.
        let died = link
            .request(2, jsonrpc::request(2, "die", None), None)
            .await;
        assert!(
            matches!(died, Err(UpstreamError::Unavailable(_))),
            "{died:?}"
        );
        let again = tokio::time::timeout(Duration::from_secs(5), link.request(3, body(3), None))
            .await
            .unwrap();
        assert!(matches!(again, Ok(Reply::Result(_))), "{again:?}");
    }

    #[tokio::test]
    async fn a_missing_command_is_unavailable_until_it_exists() {
        let link = StdioLink::start(
            "t",
            StdioServer {
                command: "/nonexistent/mcp-server".into(),
                args: vec![],
                env: BTreeMap::new(),
            },
            1 << 20,
            Duration::from_secs(1),
        );
        let r = tokio::time::timeout(
            Duration::from_millis(600),
            link.request(1, jsonrpc::request(1, "tools/list", None), None),
        )
        .await;
        assert!(
            r.is_err(),
            "a request waits for a server that never came up"
        );
    }
}
