//! In-flight de-duplication: the first request for a key leads (it calls the upstream), the
//! identical ones that arrive while it is in flight follow (they wait for its answer). The
//! leader publishes the answer's head and then its chunks as they arrive, so followers of a
//! stream get each chunk as the leader does. A leader that fails or is dropped before its end
//! releases the key: each follower then joins again, and one of them leads.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::HeaderValue;
use tokio::sync::Notify;

use crate::CacheKey;

/// The requests in flight, by key.
#[derive(Debug, Default)]
pub struct Flights {
    map: Mutex<HashMap<u128, Arc<Flight>>>,
}

/// A request's place: leading the upstream call for its key, or following the one that does.
#[derive(Debug)]
pub enum Join {
    /// Call the upstream and publish the answer.
    Lead(Leader),
    /// Wait for the leader's answer.
    Follow(Follower),
}

impl Flights {
    /// Lead the call for `key`, or follow the one in flight.
    pub fn join(self: &Arc<Self>, key: CacheKey) -> Join {
        let mut map = lock(&self.map);
        if let Some(f) = map.get(&key.0) {
            return Join::Follow(Follower {
                flight: Arc::clone(f),
                next: 0,
            });
        }
        let flight = Arc::new(Flight::default());
        map.insert(key.0, Arc::clone(&flight));
        Join::Lead(Leader {
            flights: Arc::clone(self),
            key,
            flight,
            finished: false,
        })
    }

    /// Keys in flight.
    pub fn len(&self) -> usize {
        lock(&self.map).len()
    }

    /// Whether nothing is in flight.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn release(&self, key: CacheKey, flight: &Arc<Flight>) {
        let mut map = lock(&self.map);
        if map.get(&key.0).is_some_and(|f| Arc::ptr_eq(f, flight)) {
            map.remove(&key.0);
        }
    }
}

use sluice_core::lock::lock;

/// The answer's head, as followers rebuild it.
#[derive(Debug, Clone)]
pub struct Head {
    /// Status code.
    pub status: u16,
    /// Content type.
    pub content_type: HeaderValue,
    /// Whether the chunks are a stream.
    pub stream: bool,
    /// What the answer cost upstream, when known before its body (a whole answer's): what
    /// each follower saved.
    pub cost: Option<sluice_core::limits::Nanos>,
}

#[derive(Debug, Default)]
struct State {
    head: Option<Head>,
    chunks: Vec<Bytes>,
    end: Option<End>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Complete,
    Failed,
}

#[derive(Debug, Default)]
struct Flight {
    state: Mutex<State>,
    changed: Notify,
}

/// The request that calls the upstream for its key. Dropped before [`Leader::finish`], it
/// fails its followers over to joining again.
#[derive(Debug)]
pub struct Leader {
    flights: Arc<Flights>,
    key: CacheKey,
    flight: Arc<Flight>,
    finished: bool,
}

impl Leader {
    /// Publish the answer's head.
    pub fn head(&self, head: Head) {
        lock(&self.flight.state).head = Some(head);
        self.flight.changed.notify_waiters();
    }

    /// Publish a chunk of the answer.
    pub fn push(&self, chunk: Bytes) {
        lock(&self.flight.state).chunks.push(chunk);
        self.flight.changed.notify_waiters();
    }

    /// A reader of this answer, from its start (the leader's own client reads this way, so
    /// that its leaving does not stop the others' answer).
    pub fn follower(&self) -> Follower {
        Follower {
            flight: Arc::clone(&self.flight),
            next: 0,
        }
    }

    /// The answer is complete: followers have all of it, and new requests no longer follow.
    pub fn finish(mut self) {
        self.end(End::Complete);
    }

    fn end(&mut self, end: End) {
        self.finished = true;
        lock(&self.flight.state).end = Some(end);
        self.flights.release(self.key, &self.flight);
        self.flight.changed.notify_waiters();
    }
}

impl Drop for Leader {
    fn drop(&mut self) {
        if !self.finished {
            self.end(End::Failed);
        }
    }
}

/// A request waiting for its leader's answer.
#[derive(Debug)]
pub struct Follower {
    flight: Arc<Flight>,
    next: usize,
}

/// What a follower reads next.
#[derive(Debug)]
pub enum Next {
    /// A chunk.
    Chunk(Bytes),
    /// The answer is complete.
    End,
    /// The leader failed: chunks already read stand, the rest will not come.
    Failed,
}

impl Follower {
    /// The head of the answer, or `None` if the leader failed before it had one (the
    /// follower should join again).
    pub async fn head(&mut self) -> Option<Head> {
        loop {
            let changed = self.flight.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let s = lock(&self.flight.state);
                if let Some(h) = &s.head {
                    return Some(h.clone());
                }
                if s.end.is_some() {
                    return None;
                }
            }
            changed.await;
        }
    }

    /// The next chunk, the end, or the leader's failure.
    pub async fn next(&mut self) -> Next {
        loop {
            let changed = self.flight.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let s = lock(&self.flight.state);
                if let Some(c) = s.chunks.get(self.next) {
                    self.next += 1;
                    return Next::Chunk(c.clone());
                }
                match s.end {
                    Some(End::Complete) => return Next::End,
                    Some(End::Failed) => return Next::Failed,
                    None => {}
                }
            }
            changed.await;
        }
    }

    /// Whether the follower has read nothing yet (it may still join again on a failure).
    pub fn untouched(&self) -> bool {
        self.next == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn head() -> Head {
        Head {
            status: 200,
            content_type: HeaderValue::from_static("text/event-stream"),
            stream: true,
            cost: None,
        }
    }

    #[tokio::test]
    async fn followers_get_every_chunk_as_it_arrives() {
        let flights = Arc::new(Flights::default());
        let Join::Lead(leader) = flights.join(CacheKey(1)) else {
            panic!("the first leads")
        };
        let Join::Follow(mut f) = flights.join(CacheKey(1)) else {
            panic!("the second follows")
        };
        assert!(
            matches!(flights.join(CacheKey(2)), Join::Lead(_)),
            "another key leads"
        );
        let reader = tokio::spawn(async move {
            let h = f.head().await.expect("a head");
            let mut got = Vec::new();
            loop {
                match f.next().await {
                    Next::Chunk(c) => got.push(c),
                    Next::End => return (h.status, got),
                    other => panic!("{other:?}"),
                }
            }
        });
        leader.head(head());
        for c in ["a", "b", "c"] {
            leader.push(Bytes::from_static(c.as_bytes()));
            tokio::task::yield_now().await;
        }
        leader.finish();
        assert!(flights.is_empty() || flights.len() == 1, "key 1 released");
        let (status, got) = reader.await.unwrap();
        assert_eq!(status, 200);
        assert_eq!(got, ["a", "b", "c"]);
        // After the end a new request leads again (the answer is in the store by then).
        assert!(matches!(flights.join(CacheKey(1)), Join::Lead(_)));
    }

    #[tokio::test]
    async fn a_dropped_leader_fails_its_followers_over() {
        let flights = Arc::new(Flights::default());
        let Join::Lead(leader) = flights.join(CacheKey(9)) else {
            panic!()
        };
        let Join::Follow(mut f) = flights.join(CacheKey(9)) else {
            panic!()
        };
        drop(leader);
        assert!(f.head().await.is_none(), "no head: join again");
        assert!(f.untouched());
        assert!(
            matches!(flights.join(CacheKey(9)), Join::Lead(_)),
            "a follower now leads"
        );
    }
}
