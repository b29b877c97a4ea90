//! News told to every instance at once. Key changes: the admin API publishes the digest of a
//! key it blocked, deleted or changed; each instance reloads that key from the store (the
//! store's change poll catches anything a lost message missed). Cooldowns: a deployment that
//! cools down on one instance is kept out by all for the same span.

use std::sync::Arc;
use std::time::Duration;

use super::Fleet;
use sluice_routing::{CooldownNews, Cooled};

/// The key-change channel.
pub const CHANNEL: &str = "sluice:key-changes";

/// The cooldown channel: `instance|deployment id|milliseconds`.
const COOLDOWNS: &str = "sluice:cooldowns";

/// The stored deployments changed (`/model/new`, ...): `instance`. Each other instance reads
/// them again (`models::RuntimeModels::catch_up`).
const MODELS: &str = "sluice:model-changes";

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
    /// Listen for the fleet's news for as long as the process lives, reconnecting when Redis
    /// goes away: key changes go to `on_key`, other instances' cooldowns to `on_cooldown`.
    pub fn subscribe<F, G>(self: &Arc<Self>, on_key: F, on_cooldown: G)
    where
        F: Fn(KeyChange) + Send + Sync + 'static,
        G: Fn(&str, Duration) + Send + Sync + 'static,
    {
        let me = self.instance;
        self.link
            .listen(&[CHANNEL, COOLDOWNS], move |channel, payload| {
                if channel == CHANNEL {
                    if let Some(change) = KeyChange::decode(payload) {
                        on_key(change);
                    }
                } else if let Some((id, span)) = decode_cooldown(payload, me) {
                    on_cooldown(id, span);
                }
                true
            });
    }

    /// Tell the other instances that the stored deployments changed.
    pub async fn announce_models(&self) -> bool {
        let Some(mut con) = self.connection() else {
            return false;
        };
        let sent: redis::RedisResult<i64> = redis::cmd("PUBLISH")
            .arg(MODELS)
            .arg(self.instance)
            .query_async(&mut con)
            .await;
        self.mark(sent.is_ok());
        sent.is_ok()
    }

    /// Call `on` whenever another instance says the stored deployments changed.
    pub fn on_models<F>(self: &Arc<Self>, on: F)
    where
        F: Fn() + Send + Sync + 'static,
    {
        let me = self.instance;
        self.link.listen(&[MODELS], move |_, payload| {
            if payload.parse::<u64>().ok() != Some(me) {
                on();
            }
            true
        });
    }

    /// Tell the other instances about this instance's cooldowns as they happen.
    pub fn announce_cooldowns(self: &Arc<Self>) -> CooldownNews {
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Cooled>();
        let fleet = self.clone();
        tokio::spawn(async move {
            while let Some(c) = rx.recv().await {
                let Some(mut con) = fleet.connection() else {
                    continue;
                };
                let msg = format!("{}|{}|{}", fleet.instance, c.id, c.span.as_millis());
                let sent: redis::RedisResult<i64> = redis::cmd("PUBLISH")
                    .arg(COOLDOWNS)
                    .arg(msg)
                    .query_async(&mut con)
                    .await;
                fleet.mark(sent.is_ok());
            }
        });
        tx
    }
}

/// `instance|id|ms` from another instance (our own messages come back too: ignored).
pub(crate) fn decode_cooldown(payload: &str, me: u64) -> Option<(&str, Duration)> {
    let mut parts = payload.splitn(3, '|');
    let from: u64 = parts.next()?.parse().ok()?;
    let id = parts.next()?;
    let ms: u64 = parts.next()?.parse().ok()?;
    (from != me).then_some((id, Duration::from_millis(ms.min(3_600_000))))
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

    #[test]
    fn cooldowns_from_others_only() {
        assert_eq!(
            decode_cooldown("7|dep-1|5000", 8),
            Some(("dep-1", Duration::from_millis(5000)))
        );
        assert_eq!(decode_cooldown("7|dep-1|5000", 7), None);
        assert_eq!(decode_cooldown("x", 7), None);
    }
}
