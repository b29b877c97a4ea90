//! MCP client sessions shared by the fleet: an `Mcp-Session-Id` opened on one instance is
//! honoured by every other, so a load balancer need not keep a client on one instance. Redis
//! holds each session's holder (`sluice:mcp-session:<id>` → who opened it, for which view),
//! kept a day after it was opened; an instance that meets an id it does not know asks Redis
//! once and adopts it. A session ended on one instance (`DELETE`) is deleted there and the
//! others are told on `sluice:mcp-session-ended`, so they drop their copy and cancel its calls.

use std::sync::Arc;

use super::{Fleet, CALL_TIMEOUT};

/// How long Redis keeps a session after it was opened.
const SESSION_TTL_SECS: u64 = 24 * 60 * 60;

/// The channel that tells instances a session ended: `instance|id`.
const ENDED: &str = "sluice:mcp-session-ended";

fn key(id: &str) -> String {
    format!("sluice:mcp-session:{id}")
}

impl Fleet {
    /// Share a session just opened: `holder` says who opened it and for which view.
    /// Best effort, bounded: without Redis the session still works on this instance.
    pub async fn share_session(&self, id: &str, holder: &str) -> bool {
        let Some(mut con) = self.connection() else {
            return false;
        };
        let mut set = redis::cmd("SET");
        set.arg(key(id)).arg(holder).arg("EX").arg(SESSION_TTL_SECS);
        let sent = tokio::time::timeout(CALL_TIMEOUT, set.query_async::<()>(&mut con)).await;
        let ok = matches!(sent, Ok(Ok(())));
        self.mark(ok);
        ok
    }

    /// The holder of a session another instance opened, if Redis knows it.
    pub async fn shared_session(&self, id: &str) -> Option<String> {
        let mut con = self.connection()?;
        let mut get = redis::cmd("GET");
        get.arg(key(id));
        match tokio::time::timeout(CALL_TIMEOUT, get.query_async::<Option<String>>(&mut con)).await
        {
            Ok(Ok(v)) => {
                self.mark(true);
                v
            }
            Ok(Err(_)) | Err(_) => {
                self.mark(false);
                None
            }
        }
    }

    /// A session ended here: forget it in Redis and tell the other instances.
    pub async fn end_session(&self, id: &str) {
        let Some(mut con) = self.connection() else {
            return;
        };
        let msg = format!("{}|{id}", self.instance);
        // Two calls, not one pipeline: on a Redis Cluster the session's key and the channel
        // hash to different slots, and a pipeline goes to one node.
        let mut del = redis::cmd("DEL");
        del.arg(key(id));
        let mut publish = redis::cmd("PUBLISH");
        publish.arg(ENDED).arg(msg);
        let sent = tokio::time::timeout(CALL_TIMEOUT, async {
            del.query_async::<()>(&mut con).await?;
            publish.query_async::<()>(&mut con).await
        })
        .await;
        let ok = matches!(sent, Ok(Ok(())));
        self.mark(ok);
    }

    /// Call `on` with the id of every session another instance ended.
    pub fn on_session_end<F>(self: &Arc<Self>, on: F)
    where
        F: Fn(&str) + Send + Sync + 'static,
    {
        let me = self.instance;
        self.link.listen(&[ENDED], move |_, payload| {
            if let Some((from, id)) = payload.split_once('|') {
                if from.parse::<u64>().ok() != Some(me) {
                    on(id);
                }
            }
            true
        });
    }
}

#[cfg(test)]
mod tests {
    use crate::fleet::testing::up;
    use std::time::Duration;

    #[tokio::test]
    async fn a_session_shared_by_one_is_found_by_another_until_it_ends() {
        let Some(redis) = crate::fleet::testing::redis() else {
            return;
        };
        let (a, b) = (up(&redis.url).await, up(&redis.url).await);
        let id = sluice_core::random::uuid_v4().simple().to_string();
        assert!(a.share_session(&id, "key:abc|").await);
        assert_eq!(b.shared_session(&id).await.as_deref(), Some("key:abc|"));
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        a.on_session_end(move |id| {
            let _ = tx.send(id.to_owned());
        });
        // Give the subscription a moment to be in place.
        tokio::time::sleep(Duration::from_millis(300)).await;
        b.end_session(&id).await;
        assert_eq!(b.shared_session(&id).await, None);
        let told = tokio::time::timeout(Duration::from_secs(5), rx.recv()).await;
        assert_eq!(told.ok().flatten().as_deref(), Some(id.as_str()));
    }
}
