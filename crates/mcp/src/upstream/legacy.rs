//! An SSE tool server (MCP's HTTP+SSE transport, revision 2024-11-05): sluice holds one
//! event stream open with a `GET` to its `url`, learns from the stream's first `endpoint`
//! event where to POST messages, and reads every answer back from the stream as a `message`
//! event, matched to the request waiting for it by id. One stream and one session per server,
//! opened on first use and shared by every caller. A stream that ends fails what waits on it
//! at once; the next call opens a new one, after a backoff when streams keep failing.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderMap, HeaderValue, Method, Request, Uri};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use sluice_net::client::{error_chain, UpstreamClient};
use sluice_net::SegmentsBody;
use tokio::sync::oneshot;
use tokio::time::Instant;
use tokio_util::sync::{CancellationToken, DropGuard};

use super::sse::Events;
use super::{initialize_params, negotiated_version, Reply, UpstreamError};
use crate::jsonrpc::{self, Kind, Message};
use crate::settings::{Credential, HttpServer};

const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// A stream that lived this long was healthy: the backoff starts again from the beginning.
const HEALTHY_RUN: Duration = Duration::from_secs(60);
/// How much of a POST's answer is read (the transport's answer is `202 Accepted` and a word).
const POST_ANSWER_BYTES: usize = 64 << 10;

type Waiters = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Reply, UpstreamError>>>>>;

/// sluice's link to one SSE server.
pub(super) struct LegacyLink {
    name: String,
    url: Uri,
    /// The credential headers and `static_headers`.
    headers: HeaderMap,
    client: UpstreamClient,
    max_bytes: usize,
    timeout: Duration,
    slot: tokio::sync::Mutex<Slot>,
}

impl std::fmt::Debug for LegacyLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LegacyLink").finish_non_exhaustive()
    }
}

/// The open stream, if any, and when the next may be opened.
#[derive(Default)]
struct Slot {
    conn: Option<Arc<Conn>>,
    not_before: Option<Instant>,
    backoff: Option<Duration>,
}

impl Slot {
    /// A stream failed to open or ended: wait before the next, longer each time.
    fn failed(&mut self) {
        let backoff = self.backoff.unwrap_or(FIRST_BACKOFF);
        self.not_before = Some(Instant::now() + backoff);
        self.backoff = Some((backoff * 2).min(MAX_BACKOFF));
    }
}

/// One open event stream and the session on it.
struct Conn {
    /// Where messages are POSTed (from the `endpoint` event).
    endpoint: Uri,
    waiters: Waiters,
    /// Fires when the stream ends.
    ended: CancellationToken,
    opened: Instant,
    /// Stops the stream's reader when the connection is dropped.
    _reader: DropGuard,
}

impl LegacyLink {
    pub(super) fn new(
        name: &str,
        s: &HttpServer,
        client: UpstreamClient,
        max_bytes: usize,
        timeout: Duration,
    ) -> Self {
        let mut headers = HeaderMap::new();
        // The static credential (validation refuses oauth2 for an SSE server) and the rest.
        if let Some(Credential::Header(name, value)) = &s.credential {
            headers.insert(name.clone(), value.0.clone());
        }
        for (name, value) in &s.headers {
            headers.insert(name.clone(), value.0.clone());
        }
        Self {
            name: name.to_owned(),
            url: s.url.clone(),
            headers,
            client,
            max_bytes,
            timeout,
            slot: tokio::sync::Mutex::new(Slot::default()),
        }
    }

    /// Send request `id` and wait for its answer on the stream.
    pub(super) async fn request(&self, id: u64, body: String) -> Result<Reply, UpstreamError> {
        let conn = self.conn().await?;
        exchange(&self.client, &self.headers, &conn, id, body).await
    }

    /// Send a notification.
    pub(super) async fn notify(&self, body: String) -> Result<(), UpstreamError> {
        let conn = self.conn().await?;
        post(&self.client, &self.headers, &conn.endpoint, body).await
    }

    /// The open stream's connection, opening one (and its session) first when there is none
    /// or the last one ended.
    async fn conn(&self) -> Result<Arc<Conn>, UpstreamError> {
        let mut slot = self.slot.lock().await;
        if let Some(c) = slot.conn.as_ref().filter(|c| !c.ended.is_cancelled()) {
            return Ok(Arc::clone(c));
        }
        if let Some(c) = slot.conn.take() {
            if c.opened.elapsed() >= HEALTHY_RUN {
                slot.backoff = None;
            }
            slot.failed();
        }
        if let Some(t) = slot.not_before {
            tokio::time::sleep_until(t).await;
        }
        match self.open().await {
            Ok(c) => {
                tracing::info!(server = %self.name, "MCP SSE server ready");
                slot.not_before = None;
                slot.conn = Some(Arc::clone(&c));
                Ok(c)
            }
            Err(e) => {
                slot.failed();
                Err(e)
            }
        }
    }

    /// Open the stream, wait for its `endpoint`, and open the session on it (`initialize`,
    /// then `notifications/initialized`).
    async fn open(&self) -> Result<Arc<Conn>, UpstreamError> {
        let mut req = Request::builder()
            .method(Method::GET)
            .uri(self.url.clone())
            .body(SegmentsBody::new(Vec::new()))
            .map_err(|e| UpstreamError::Unavailable(e.to_string()))?;
        *req.headers_mut() = self.headers.clone();
        req.headers_mut()
            .insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        let resp = tokio::time::timeout(self.timeout, self.client.request(req))
            .await
            .map_err(|_| UpstreamError::Timeout(self.timeout))?
            .map_err(|e| UpstreamError::Unavailable(error_chain("connection failed".into(), &e)))?;
        if !resp.status().is_success() {
            return Err(UpstreamError::Status(resp.status().as_u16()));
        }
        let waiters = Waiters::default();
        let ended = CancellationToken::new();
        let stop = CancellationToken::new();
        let (endpoint_tx, endpoint_rx) = oneshot::channel();
        let reader = Reader {
            name: self.name.clone(),
            url: self.url.clone(),
            headers: self.headers.clone(),
            client: self.client.clone(),
            max_bytes: self.max_bytes,
            waiters: Arc::clone(&waiters),
        };
        // Dropped on every early return below, which stops the reader and its stream.
        let reader_guard = stop.clone().drop_guard();
        let ended2 = ended.clone();
        tokio::spawn(async move {
            let why = tokio::select! {
                () = stop.cancelled() => "closed by sluice".to_owned(),
                why = reader.run(resp.into_body(), endpoint_tx) => why,
            };
            ended2.cancel();
            tracing::info!(server = %reader.name, reason = %why, "MCP SSE stream ended");
            // Whoever still waits learns now, not at their timeout.
            for (_, w) in lock(&reader.waiters).drain() {
                let _ = w.send(Err(UpstreamError::Unavailable(why.clone())));
            }
        });
        let endpoint = match tokio::time::timeout(self.timeout, endpoint_rx).await {
            Ok(Ok(r)) => r?,
            Ok(Err(_)) => {
                return Err(UpstreamError::Protocol(
                    "the event stream ended before its endpoint event".into(),
                ))
            }
            Err(_) => return Err(UpstreamError::Timeout(self.timeout)),
        };
        let conn = Arc::new(Conn {
            endpoint,
            waiters,
            ended,
            opened: Instant::now(),
            _reader: reader_guard,
        });
        let init = jsonrpc::request(0, "initialize", Some(&initialize_params()));
        match exchange(&self.client, &self.headers, &conn, 0, init).await? {
            Reply::Result(r) => {
                negotiated_version(&r)?;
            }
            Reply::Error(e) => {
                return Err(UpstreamError::Protocol(format!(
                    "initialize refused: {}",
                    e.get()
                )))
            }
        }
        let done = jsonrpc::notification("notifications/initialized", None);
        post(&self.client, &self.headers, &conn.endpoint, done).await?;
        Ok(conn)
    }
}

/// POST request `id` to the connection's endpoint and wait for its answer on the stream.
async fn exchange(
    client: &UpstreamClient,
    headers: &HeaderMap,
    conn: &Conn,
    id: u64,
    body: String,
) -> Result<Reply, UpstreamError> {
    let (tx, rx) = oneshot::channel();
    lock(&conn.waiters).insert(id, tx);
    // The waiter leaves the map however this ends (answered, timed out, dropped).
    let _forget = Forget {
        waiters: &conn.waiters,
        id,
    };
    post(client, headers, &conn.endpoint, body).await?;
    tokio::select! {
        reply = rx => reply.map_err(|_| UpstreamError::Unavailable("the event stream ended".into()))?,
        () = conn.ended.cancelled() => Err(UpstreamError::Unavailable("the event stream ended".into())),
    }
}

/// POST one message; the answer comes on the stream, the POST's own is only its status.
async fn post(
    client: &UpstreamClient,
    headers: &HeaderMap,
    endpoint: &Uri,
    body: String,
) -> Result<(), UpstreamError> {
    let mut req = Request::builder()
        .method(Method::POST)
        .uri(endpoint.clone())
        .body(SegmentsBody::new(vec![Bytes::from(body)]))
        .map_err(|e| UpstreamError::Unavailable(e.to_string()))?;
    *req.headers_mut() = headers.clone();
    req.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    let resp = client
        .request(req)
        .await
        .map_err(|e| UpstreamError::Unavailable(error_chain("connection failed".into(), &e)))?;
    let status = resp.status();
    // Read the short answer so the connection goes back to the pool.
    let mut body = resp.into_body();
    let mut seen = 0usize;
    while seen <= POST_ANSWER_BYTES {
        match body.frame().await {
            Some(Ok(f)) => seen += f.data_ref().map_or(0, Bytes::len),
            _ => break,
        }
    }
    if status.is_success() {
        Ok(())
    } else {
        Err(UpstreamError::Status(status.as_u16()))
    }
}

/// What reads one stream.
struct Reader {
    name: String,
    url: Uri,
    headers: HeaderMap,
    client: UpstreamClient,
    max_bytes: usize,
    waiters: Waiters,
}

impl Reader {
    /// Read the stream until it ends; says why it ended. The first `endpoint` event goes to
    /// `endpoint`; `message` events are answers (to their waiters), requests from the server
    /// (refused, as sluice serves no client features) or notifications (dropped).
    async fn run(
        &self,
        mut body: Incoming,
        endpoint: oneshot::Sender<Result<Uri, UpstreamError>>,
    ) -> String {
        let mut endpoint = Some(endpoint);
        let mut posts_to = None;
        let mut events = Events::default();
        loop {
            let data = match body.frame().await {
                None => return "the server closed the stream".into(),
                Some(Err(e)) => return error_chain("the stream broke".into(), &e),
                Some(Ok(f)) => match f.into_data() {
                    Ok(d) => d,
                    Err(_) => continue,
                },
            };
            let got = events.feed_events(&data);
            if events.pending() > self.max_bytes {
                return format!("an event exceeded {} bytes", self.max_bytes);
            }
            for e in got {
                if e.data.len() > self.max_bytes {
                    return format!("an event exceeded {} bytes", self.max_bytes);
                }
                match e.name.as_str() {
                    "endpoint" => {
                        let at = resolve(&self.url, e.data.trim());
                        if let Ok(u) = &at {
                            posts_to = Some(u.clone());
                        }
                        match endpoint.take() {
                            Some(tx) => {
                                let _ = tx.send(at);
                            }
                            None => {
                                tracing::debug!(server = %self.name, "a second endpoint event ignored")
                            }
                        }
                    }
                    "message" => self.message(e.data.as_bytes(), posts_to.as_ref()),
                    _ => {}
                }
            }
        }
    }

    fn message(&self, text: &[u8], posts_to: Option<&Uri>) {
        let Some(refusal) = deliver(text, &self.waiters) else {
            return;
        };
        let Some(to) = posts_to.cloned() else {
            return;
        };
        let (client, headers) = (self.client.clone(), self.headers.clone());
        tokio::spawn(async move {
            let _ = post(&client, &headers, &to, refusal).await;
        });
    }
}

/// A `message` event: a response goes to the request waiting for its id; a request from the
/// server (sampling, roots) is refused, and the refusal returned for sending; notifications
/// (they concern sluice's own session) and what is not JSON-RPC are dropped.
fn deliver(text: &[u8], waiters: &Waiters) -> Option<String> {
    let m = Message::parse(text)?;
    match m.kind() {
        Kind::Response => {
            let id = m.id.and_then(|i| i.get().parse::<u64>().ok())?;
            if let Some(w) = lock(waiters).remove(&id) {
                let _ = w.send(Reply::of(&m));
            }
            None
        }
        Kind::Request => Some(jsonrpc::error(
            m.id.map_or("null", |i| i.get()),
            jsonrpc::code::METHOD_NOT_FOUND,
            "sluice does not serve client features to tool servers",
        )),
        Kind::Notification | Kind::Invalid => None,
    }
}

/// The endpoint an `endpoint` event names, relative to the stream's `url`; refused on another
/// origin (sluice's credentials would go with it).
fn resolve(base: &Uri, endpoint: &str) -> Result<Uri, UpstreamError> {
    let bad = || UpstreamError::Protocol("the endpoint event is not a URI".into());
    let (Some(scheme), Some(authority)) = (base.scheme(), base.authority()) else {
        return Err(bad());
    };
    let elsewhere = || UpstreamError::Protocol("the endpoint event names another origin".into());
    if endpoint.starts_with("//") {
        return Err(elsewhere());
    }
    if endpoint.contains("://") {
        let given: Uri = endpoint.parse().map_err(|_| bad())?;
        if given.scheme() != Some(scheme) || given.authority() != Some(authority) {
            return Err(elsewhere());
        }
        return Ok(given);
    }
    let path = if endpoint.starts_with('/') {
        endpoint.to_owned()
    } else {
        // Relative to the stream's path, as a browser resolves it.
        let dir = base.path().rsplit_once('/').map_or("", |(d, _)| d);
        format!("{dir}/{endpoint}")
    };
    format!("{scheme}://{authority}{path}")
        .parse()
        .map_err(|_| bad())
}

struct Forget<'a> {
    waiters: &'a Waiters,
    id: u64,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        lock(self.waiters).remove(&self.id);
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    match m.lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_resolve_against_the_stream_and_stay_on_its_origin() {
        let base: Uri = "http://127.0.0.1:8000/mcp/sse".parse().unwrap();
        let r = |e: &str| resolve(&base, e).map(|u| u.to_string());
        assert_eq!(
            r("/messages/?session_id=ab").unwrap(),
            "http://127.0.0.1:8000/messages/?session_id=ab"
        );
        assert_eq!(
            r("messages?session_id=ab").unwrap(),
            "http://127.0.0.1:8000/mcp/messages?session_id=ab"
        );
        assert_eq!(
            r("http://127.0.0.1:8000/m?s=1").unwrap(),
            "http://127.0.0.1:8000/m?s=1"
        );
        for elsewhere in [
            "http://127.0.0.2:8000/m",
            "https://127.0.0.1:8000/m",
            "//evil/m",
        ] {
            assert!(
                matches!(resolve(&base, elsewhere), Err(UpstreamError::Protocol(m)) if m.contains("origin")),
                "{elsewhere}"
            );
        }
    }

    #[test]
    fn messages_reach_their_waiters_and_requests_are_refused() {
        let waiters = Waiters::default();
        let (tx3, mut rx3) = oneshot::channel();
        let (tx4, mut rx4) = oneshot::channel();
        lock(&waiters).insert(3, tx3);
        lock(&waiters).insert(4, tx4);
        let progress = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{}}"#;
        assert!(deliver(progress, &waiters).is_none());
        assert!(deliver(b"not json", &waiters).is_none());
        assert!(deliver(
            br#"{"jsonrpc":"2.0","id":4,"error":{"code":1,"message":"m"}}"#,
            &waiters
        )
        .is_none());
        assert!(matches!(rx4.try_recv(), Ok(Ok(Reply::Error(_)))));
        assert!(rx3.try_recv().is_err(), "3 still waits");
        assert!(deliver(br#"{"jsonrpc":"2.0","id":9,"result":{}}"#, &waiters).is_none());
        assert!(deliver(br#"{"jsonrpc":"2.0","id":3,"result":{"x":1}}"#, &waiters).is_none());
        let Ok(Ok(Reply::Result(r))) = rx3.try_recv() else {
            panic!("3 answered")
        };
        assert_eq!(r.get(), r#"{"x":1}"#);
        let refusal = deliver(
            br#"{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage"}"#,
            &waiters,
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&refusal).unwrap();
        assert_eq!(v["id"], "s1");
        assert_eq!(v["error"]["code"], jsonrpc::code::METHOD_NOT_FOUND);
    }
}
