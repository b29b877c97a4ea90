//! Key changes told to every instance at once: the admin API publishes the digest of a key it
//! blocked, deleted or changed; each instance's subscriber reloads that key from the store.
//! The store's change poll (auth sync) catches anything a lost message missed.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt;

use super::Fleet;

/// The Redis channel.
pub const CHANNEL: &str = "sluice:key-changes";

/// Which key changed (its digest in hex; never the key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyChange {
    /// Hex SHA-256 of the key.
    pub hash: String,
}

impl KeyChange {
    /// The message text.
    pub fn encode(&self) -> &str {
        &self.hash
    }

    /// Read a message; anything but 64 hex digits is ignored.
    pub fn decode(payload: &str) -> Option<Self> {
        (payload.len() == 64 && payload.bytes().all(|b| b.is_ascii_hexdigit())).then(|| Self {
            hash: payload.to_ascii_lowercase(),
        })
    }
}

impl Fleet {
    /// Listen for key changes for as long as the process lives, reconnecting when Redis goes
    /// away, and hand each one to `on_change`.
    pub fn subscribe<F>(self: &Arc<Self>, on_change: F)
    where
        F: Fn(KeyChange) + Send + Sync + 'static,
    {
        let fleet = self.clone();
        tokio::spawn(async move {
            loop {
                match fleet.client().get_async_pubsub().await {
                    Ok(mut ps) => {
                        if ps.subscribe(CHANNEL).await.is_ok() {
                            let mut messages = ps.on_message();
                            while let Some(msg) = messages.next().await {
                                let payload: String = msg.get_payload().unwrap_or_default();
                                if let Some(change) = KeyChange::decode(&payload) {
                                    on_change(change);
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_digests_are_messages() {
        let h = "ab".repeat(32);
        assert_eq!(KeyChange::decode(&h).map(|c| c.hash), Some(h));
        assert_eq!(KeyChange::decode("sk-1234"), None);
    }
}
