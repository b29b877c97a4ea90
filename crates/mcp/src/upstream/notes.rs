//! What a tool server says about one request while it works on it: `notifications/progress`
//! for the token sluice gave that request, and `notifications/message` (logging) sent on the
//! request's own answer stream. They are handed to whoever waits for the request as they
//! arrive, through a bounded queue: when its reader is slow they are dropped, never buffered
//! without limit (progress is advisory; the response itself never goes this way).

use serde::Deserialize;
use serde_json::value::RawValue;
use tokio::sync::mpsc;

use crate::jsonrpc::Message;

/// The method of a progress notification.
pub const PROGRESS: &str = "notifications/progress";
/// The method of a log message.
pub const LOG: &str = "notifications/message";

/// Where one request's notifications go (each as the JSON text the server sent).
#[derive(Debug, Clone)]
pub struct Notes(mpsc::Sender<String>);

impl Notes {
    /// A sink and its reader, holding at most `depth` notifications unread.
    pub fn channel(depth: usize) -> (Self, mpsc::Receiver<String>) {
        let (tx, rx) = mpsc::channel(depth.max(1));
        (Self(tx), rx)
    }

    /// Hand a notification over, or drop it when the reader is behind or gone.
    pub(super) fn offer(&self, text: &[u8]) {
        if let Ok(text) = std::str::from_utf8(text) {
            let _ = self.0.try_send(text.to_owned());
        }
    }
}

/// Whether notification `m`, read on request `id`'s answer stream, is for its caller: its
/// progress (sluice gave the request its own id as the progress token), or a log message.
pub(super) fn for_request(m: &Message<'_>, id: u64) -> bool {
    match m.method {
        Some(PROGRESS) => progress_token(m) == Some(id),
        Some(LOG) => true,
        _ => false,
    }
}

/// The progress token of a `notifications/progress`, when it is one of sluice's (a number).
pub(super) fn progress_token(m: &Message<'_>) -> Option<u64> {
    #[derive(Deserialize)]
    struct P<'a> {
        #[serde(rename = "progressToken", borrow)]
        token: &'a RawValue,
    }
    let p: P<'_> = serde_json::from_str(m.params?.get()).ok()?;
    p.token.get().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_by_token_and_logs() {
        let p = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":7,"progress":1}}"#;
        let m = Message::parse(p).unwrap();
        assert!(for_request(&m, 7));
        assert!(!for_request(&m, 8));
        let s = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"7","progress":1}}"#;
        assert!(!for_request(&Message::parse(s).unwrap(), 7));
        let log = br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}}"#;
        assert!(for_request(&Message::parse(log).unwrap(), 7));
        let other = br#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{}}"#;
        assert!(!for_request(&Message::parse(other).unwrap(), 7));
    }

    #[tokio::test]
    async fn a_full_queue_drops_rather_than_grows() {
        let (notes, mut rx) = Notes::channel(2);
        for i in 0..5 {
            notes.offer(format!("{i}").as_bytes());
        }
        assert_eq!(rx.recv().await.as_deref(), Some("0"));
        assert_eq!(rx.recv().await.as_deref(), Some("1"));
        assert!(rx.try_recv().is_err());
    }
}
