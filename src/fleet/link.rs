//! One Redis connection that keeps itself up: connected in the background (an instance starts
//! while Redis is down), reconnected by redis' connection manager once it exists, and a flag
//! saying whether the last call got an answer. The fleet's counters and the shared response
//! cache each hold one.

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;
use futures_util::StreamExt;
use redis::aio::{ConnectionManager, ConnectionManagerConfig};

use sluice_core::Secret;

/// The Redis URL did not parse (the URL itself is not echoed: it may hold a password).
#[derive(Debug, thiserror::Error)]
#[error("the Redis address is not a valid redis:// URL")]
pub struct BadRedisUrl;

/// A connection to Redis and whether it currently answers.
pub struct RedisLink {
    client: redis::Client,
    conn: ArcSwapOption<ConnectionManager>,
    up: AtomicBool,
    /// What this link serves, for the log lines when it goes down or comes back.
    role: (&'static str, &'static str),
}

impl std::fmt::Debug for RedisLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisLink")
            .field("up", &self.is_up())
            .finish()
    }
}

impl RedisLink {
    /// A link to `url` whose calls wait at most `timeout`; connecting runs in the background.
    /// `role` is what the log says when Redis comes back and when it goes away.
    pub fn start(
        url: &Secret,
        timeout: Duration,
        role: (&'static str, &'static str),
    ) -> Result<Arc<Self>, BadRedisUrl> {
        let client = redis::Client::open(url.expose()).map_err(|_| BadRedisUrl)?;
        let link = Arc::new(Self {
            client,
            conn: ArcSwapOption::empty(),
            up: AtomicBool::new(false),
            role,
        });
        tokio::spawn(link.clone().connect_loop(timeout));
        Ok(link)
    }

    /// Keep a connection manager in place; it reconnects by itself once it exists.
    async fn connect_loop(self: Arc<Self>, timeout: Duration) {
        let mut wait = Duration::from_millis(100);
        loop {
            let config = ConnectionManagerConfig::new()
                .set_connection_timeout(Some(Duration::from_secs(1)))
                .set_response_timeout(Some(timeout))
                .set_max_delay(Duration::from_secs(2));
            match ConnectionManager::new_with_config(self.client.clone(), config).await {
                Ok(m) => {
                    self.conn.store(Some(Arc::new(m)));
                    self.mark(true);
                    return;
                }
                Err(e) => {
                    self.mark(false);
                    tracing::debug!(error = ?e.kind(), "redis connect failed; retrying");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(2));
                }
            }
        }
    }

    /// Whether Redis answered the last call.
    pub fn is_up(&self) -> bool {
        self.up.load(Relaxed)
    }

    /// Note whether the last call got an answer (logged when that changes).
    pub fn mark(&self, up: bool) {
        if self.up.swap(up, Relaxed) != up {
            if up {
                tracing::info!("redis reachable: {}", self.role.0);
            } else {
                tracing::warn!("redis unreachable: {}", self.role.1);
            }
        }
    }

    /// A handle on the connection, once there is one.
    pub fn connection(&self) -> Option<ConnectionManager> {
        self.conn.load().as_deref().cloned()
    }

    /// Hear `channels` for as long as `on` wants (it returns `false` to stop), resubscribing
    /// whenever Redis goes away and comes back. `on` gets each message's channel and text.
    pub fn listen<F>(self: &Arc<Self>, channels: &'static [&'static str], mut on: F)
    where
        F: FnMut(&str, &str) -> bool + Send + 'static,
    {
        let link = self.clone();
        tokio::spawn(async move {
            loop {
                match link.client.get_async_pubsub().await {
                    Ok(mut ps) => {
                        if ps.subscribe(channels).await.is_ok() {
                            let mut messages = ps.on_message();
                            while let Some(msg) = messages.next().await {
                                let payload: String = msg.get_payload().unwrap_or_default();
                                if !on(msg.get_channel_name(), &payload) {
                                    return;
                                }
                            }
                        }
                    }
                    Err(e) => tracing::debug!(error = ?e.kind(), "redis subscribe failed"),
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        });
    }
}
