//! Small values the fleet's instances share beside their counters: a document one instance
//! writes and the others read (the latest round of health checks), and a running total of a
//! day (what health checks spent). Each call is bounded like the other Redis calls; `None`
//! means Redis did not answer and the caller goes on with what it knows alone.

use std::time::Duration;

use super::{Fleet, CALL_TIMEOUT};

/// Millisecond TTL for `SET ... PX` and `PEXPIRE`, at least one.
fn ttl_ms(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

impl Fleet {
    /// This instance's id, as other instances see it in shared documents.
    pub fn instance_id(&self) -> String {
        format!("{:016x}", self.instance)
    }

    /// Store `value` under `name` for `ttl`, replacing what was there.
    pub async fn put(&self, name: &str, value: &[u8], ttl: Duration) -> Option<()> {
        let mut con = self.connection()?;
        let mut cmd = redis::cmd("SET");
        cmd.arg(format!("sluice:shared:{name}"))
            .arg(value)
            .arg("PX")
            .arg(ttl_ms(ttl));
        let set = cmd.query_async::<()>(&mut con);
        let answer = tokio::time::timeout(CALL_TIMEOUT * 4, set).await;
        self.mark(matches!(answer, Ok(Ok(()))));
        answer.ok()?.ok()
    }

    /// What is stored under `name`: `Some(None)` when nothing is.
    pub async fn get(&self, name: &str) -> Option<Option<Vec<u8>>> {
        let mut con = self.connection()?;
        let mut cmd = redis::cmd("GET");
        cmd.arg(format!("sluice:shared:{name}"));
        let get = cmd.query_async::<Option<Vec<u8>>>(&mut con);
        match tokio::time::timeout(CALL_TIMEOUT * 4, get).await {
            Ok(Ok(v)) => {
                self.mark(true);
                Some(v)
            }
            Ok(Err(_)) | Err(_) => {
                self.mark(false);
                None
            }
        }
    }

    /// Add `by` to the total `name` (kept for `ttl` after its last addition) and return the
    /// new total.
    pub async fn add(&self, name: &str, by: u64, ttl: Duration) -> Option<u64> {
        let mut con = self.connection()?;
        let key = format!("sluice:shared:{name}");
        let mut pipe = redis::pipe();
        pipe.cmd("INCRBY")
            .arg(&key)
            .arg(by)
            .cmd("PEXPIRE")
            .arg(&key)
            .arg(ttl_ms(ttl))
            .ignore();
        let add = pipe.query_async::<(u64,)>(&mut con);
        match tokio::time::timeout(CALL_TIMEOUT * 4, add).await {
            Ok(Ok((total,))) => {
                self.mark(true);
                Some(total)
            }
            Ok(Err(_)) | Err(_) => {
                self.mark(false);
                None
            }
        }
    }
}
