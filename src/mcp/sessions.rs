//! Client sessions on `/mcp` (`Mcp-Session-Id`, or the SSE transport's `session_id`): who
//! opened each (a session is only ever used by the key that opened it), which view it has (all
//! servers or one), and its calls in flight, so that a client's `notifications/cancelled`
//! reaches the tool server working on it. A session on an event stream also holds the one
//! sender every message to its client goes through. With a fleet, `shared.rs` lets every
//! instance hold a streamable-HTTP session any of them opened.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Most sessions kept; opening one more forgets the longest idle.
const MAX_SESSIONS: usize = 10_000;

/// Who a session belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Owner {
    /// No master key: the gateway is open.
    Open,
    /// The master key.
    Master,
    /// A virtual key, by hash.
    Key(Arc<str>),
}

/// One client session.
#[derive(Debug)]
pub struct Session {
    /// Who opened it.
    pub owner: Owner,
    /// `Some(server)` on `/mcp/{server}`.
    pub scope: Option<String>,
    /// Calls in flight, by the client's JSON-RPC id (raw JSON text).
    in_flight: Mutex<HashMap<String, CancellationToken>>,
    last_used_ms: AtomicU64,
    /// Into the client's event stream (SSE transport): JSON-RPC messages, in order.
    outbox: Option<mpsc::Sender<String>>,
    /// Fires when the session ends (closed, or forgotten to make room).
    ended: CancellationToken,
}

impl Session {
    fn new(
        owner: Owner,
        scope: Option<String>,
        now_ms: u64,
        outbox: Option<mpsc::Sender<String>>,
    ) -> Self {
        Self {
            owner,
            scope,
            in_flight: Mutex::default(),
            last_used_ms: AtomicU64::new(now_ms),
            outbox,
            ended: CancellationToken::new(),
        }
    }

    /// Register the client's request `id` as in flight until the returned guard drops
    /// (answered, or the client left); its token fires on cancellation.
    pub fn begin<'a>(&'a self, id: &'a str) -> InFlight<'a> {
        let token = CancellationToken::new();
        lock(&self.in_flight).insert(id.to_owned(), token.clone());
        InFlight {
            session: self,
            id,
            token,
        }
    }

    /// The client cancelled request `id`.
    pub fn cancel(&self, id: &str) {
        if let Some(t) = lock(&self.in_flight).remove(id) {
            t.cancel();
        }
    }

    /// The sender into the client's event stream, when the session has one.
    pub fn outbox(&self) -> Option<&mpsc::Sender<String>> {
        self.outbox.as_ref()
    }

    /// Fires when the session ends.
    pub fn ended(&self) -> CancellationToken {
        self.ended.clone()
    }

    /// End it: its calls in flight are cancelled.
    fn end(&self) {
        self.ended.cancel();
        for (_, t) in lock(&self.in_flight).drain() {
            t.cancel();
        }
    }
}

/// A client's request in flight in its session.
#[derive(Debug)]
pub struct InFlight<'a> {
    session: &'a Session,
    id: &'a str,
    token: CancellationToken,
}

impl InFlight<'_> {
    /// Fires when the client cancels the request or ends the session.
    pub fn token(&self) -> CancellationToken {
        self.token.clone()
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        lock(&self.session.in_flight).remove(self.id);
    }
}

/// Every open session.
#[derive(Debug, Default)]
pub struct Sessions {
    map: Mutex<HashMap<String, Arc<Session>>>,
}

impl Sessions {
    /// Open a session; returns its id.
    pub fn open(&self, owner: Owner, scope: Option<String>, now_ms: u64) -> String {
        self.open_with(owner, scope, now_ms, None).0
    }

    /// Open a session whose messages to the client go through `outbox` (an event stream);
    /// returns its id and the session.
    pub fn open_with(
        &self,
        owner: Owner,
        scope: Option<String>,
        now_ms: u64,
        outbox: Option<mpsc::Sender<String>>,
    ) -> (String, Arc<Session>) {
        let id = sluice_core::random::uuid_v4().simple().to_string();
        let session = self.insert(&id, Session::new(owner, scope, now_ms, outbox));
        (id, session)
    }

    /// Keep `session` as `id` (the one already there, if any, stays), forgetting (and ending)
    /// the longest idle session when full.
    fn insert(&self, id: &str, session: Session) -> Arc<Session> {
        let mut map = lock(&self.map);
        if map.len() >= MAX_SESSIONS && !map.contains_key(id) {
            let idle = map
                .iter()
                .min_by_key(|(_, s)| s.last_used_ms.load(Ordering::Relaxed))
                .map(|(k, _)| k.clone());
            if let Some(s) = idle.and_then(|k| map.remove(&k)) {
                s.end();
            }
        }
        Arc::clone(
            map.entry(id.to_owned())
                .or_insert_with(|| Arc::new(session)),
        )
    }

    /// Hold a session another instance of the fleet opened (`shared::adopt` checked that
    /// `owner` opened it for `scope`).
    pub fn adopt(&self, id: &str, owner: Owner, scope: Option<&str>, now_ms: u64) -> Arc<Session> {
        self.insert(
            id,
            Session::new(owner, scope.map(str::to_owned), now_ms, None),
        )
    }

    /// Drop session `id` whoever opened it (another instance ended it); cancels its calls.
    pub fn forget(&self, id: &str) {
        let gone = lock(&self.map).remove(id);
        if let Some(s) = gone {
            s.end();
        }
    }

    /// The session `id` when `owner` opened it for `scope`.
    pub fn get(
        &self,
        id: &str,
        owner: &Owner,
        scope: Option<&str>,
        now_ms: u64,
    ) -> Option<Arc<Session>> {
        let map = lock(&self.map);
        let s = map
            .get(id)
            .filter(|s| s.owner == *owner && s.scope.as_deref() == scope)?;
        s.last_used_ms.store(now_ms, Ordering::Relaxed);
        Some(Arc::clone(s))
    }

    /// End the session `id` (`DELETE`), when `owner` opened it; cancels its calls.
    pub fn close(&self, id: &str, owner: &Owner) -> bool {
        let mut map = lock(&self.map);
        if map.get(id).is_some_and(|s| s.owner == *owner) {
            if let Some(s) = map.remove(id) {
                s.end();
            }
            return true;
        }
        false
    }
}

use sluice_core::lock::lock;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_is_its_owners_and_its_scopes() {
        let s = Sessions::default();
        let key = Owner::Key("h1".into());
        let id = s.open(key.clone(), None, 1);
        assert!(s.get(&id, &key, None, 2).is_some());
        assert!(s.get(&id, &Owner::Key("h2".into()), None, 2).is_none());
        assert!(s.get(&id, &key, Some("gh"), 2).is_none());
        assert!(!s.close(&id, &Owner::Master));
        let session = s.get(&id, &key, None, 3).unwrap();
        let call = session.begin("7");
        let t = call.token();
        assert!(s.close(&id, &key));
        assert!(t.is_cancelled(), "closing cancels calls in flight");
        assert!(s.get(&id, &key, None, 4).is_none());
    }

    #[test]
    fn a_stream_session_keeps_its_sender_and_ends_once() {
        let s = Sessions::default();
        let (tx, mut rx) = mpsc::channel(1);
        let (id, session) = s.open_with(Owner::Open, None, 1, Some(tx));
        let ended = session.ended();
        session.outbox().unwrap().try_send("m".into()).unwrap();
        assert_eq!(rx.try_recv().unwrap(), "m");
        assert!(!ended.is_cancelled());
        assert!(s.close(&id, &Owner::Open));
        assert!(ended.is_cancelled(), "closing ends the stream");
        assert!(!s.close(&id, &Owner::Open));
    }

    #[test]
    fn cancel_fires_the_calls_token() {
        let s = Sessions::default();
        let id = s.open(Owner::Open, None, 1);
        let session = s.get(&id, &Owner::Open, None, 1).unwrap();
        let call = session.begin("\"a\"");
        let t = call.token();
        session.cancel("\"b\"");
        assert!(!t.is_cancelled());
        session.cancel("\"a\"");
        assert!(t.is_cancelled());
        // A call that ends (or whose client left) leaves the session.
        let other = session.begin("\"c\"");
        drop(other);
        assert!(lock(&session.in_flight).is_empty());
    }
}
