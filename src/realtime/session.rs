//! One Realtime API session in flight: frames relayed both ways as they arrive (text and
//! binary as received, pings and pongs, the close with its code), the usage of every
//! `response.done` the upstream sends added up, and the session charged and recorded once
//! when it ends, however it ended (either side closing, a broken connection, shutdown).

use std::time::Duration;

use futures_util::{SinkExt, Stream, StreamExt};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use sluice_core::record::{Outcome, RequestRecord};
use sluice_core::usage::{usage_from_body, Usage};
use sluice_telemetry::Recorder;

use crate::spend::Charges;

/// The upstream side of a session.
pub(super) type Upstream = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How long the side that did not close gets to answer a close before the session ends.
const CLOSE_GRACE: Duration = Duration::from_secs(5);

/// A session's record, charges and usage so far; settled and recorded when dropped.
pub(super) struct Session {
    record: RequestRecord,
    recorder: Recorder,
    charges: Charges,
    usage: Option<Usage>,
}

impl Session {
    /// A session that will charge `charges` and write `record` when it ends.
    pub(super) fn new(record: RequestRecord, recorder: Recorder, charges: Charges) -> Self {
        Self {
            record,
            recorder,
            charges,
            usage: None,
        }
    }

    /// Wait for the client's connection to switch protocols, then relay until either side
    /// closes or goes.
    pub(super) async fn run(mut self, on_upgrade: OnUpgrade, upstream: Upstream) {
        let Ok(upgraded) = on_upgrade.await else {
            self.record.outcome = Outcome::ClientGone;
            return;
        };
        let client =
            WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
        self.record.outcome = self.relay(client, upstream).await;
    }

    /// Relay both ways; returns how the session ended.
    async fn relay<C>(&mut self, client: WebSocketStream<C>, upstream: Upstream) -> Outcome
    where
        C: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    {
        let (mut to_client, mut from_client) = client.split();
        let (mut to_upstream, mut from_upstream) = upstream.split();
        loop {
            tokio::select! {
                m = from_client.next() => match m {
                    Some(Ok(msg)) => {
                        let close = msg.is_close();
                        if to_upstream.send(msg).await.is_err() {
                            return Outcome::StreamCut;
                        }
                        if close {
                            // The upstream's answer to the close, and any event still on its
                            // way (a last `response.done`), before the session ends.
                            self.drain(&mut from_upstream).await;
                            // tungstenite queued the reply to the client's close when it read
                            // it; closing the sink sends it.
                            let _ = to_client.close().await;
                            return Outcome::StreamComplete;
                        }
                    }
                    Some(Err(_)) | None => {
                        let _ = to_upstream.close().await;
                        return Outcome::ClientGone;
                    }
                },
                m = from_upstream.next() => match m {
                    Some(Ok(msg)) => {
                        self.tally(&msg);
                        let close = msg.is_close();
                        if to_client.send(msg).await.is_err() {
                            let _ = to_upstream.close().await;
                            return Outcome::ClientGone;
                        }
                        if close {
                            drain_quietly(&mut from_client).await;
                            // The reply to the upstream's close, queued when it was read.
                            let _ = to_upstream.close().await;
                            return Outcome::StreamComplete;
                        }
                    }
                    Some(Err(_)) | None => {
                        let _ = to_client.close().await;
                        return Outcome::StreamCut;
                    }
                },
            }
        }
    }

    /// Read what the upstream still sends after the client closed, for its usage, until it
    /// closes too (at most [`CLOSE_GRACE`]).
    async fn drain<S>(&mut self, from_upstream: &mut S)
    where
        S: Stream<Item = Result<Message, WsError>> + Unpin,
    {
        let reading = async {
            while let Some(Ok(msg)) = from_upstream.next().await {
                self.tally(&msg);
            }
        };
        let _ = tokio::time::timeout(CLOSE_GRACE, reading).await;
    }

    /// Add the usage of a `response.done` event.
    fn tally(&mut self, msg: &Message) {
        if let Some(u) = usage_of(msg) {
            self.usage = Some(self.usage.map_or(u, |sum| sum + u));
        }
    }
}

/// The usage a server event reports: only `response.done` carries it, and only frames that
/// name that event are parsed (deltas go by with one substring search).
fn usage_of(msg: &Message) -> Option<Usage> {
    let Message::Text(text) = msg else {
        return None;
    };
    if !text.as_str().contains("\"response.done\"") {
        return None;
    }
    usage_from_body(text.as_bytes())
}

/// Let a closing peer's last frames go by (at most [`CLOSE_GRACE`]).
async fn drain_quietly<S>(from: &mut S)
where
    S: Stream<Item = Result<Message, WsError>> + Unpin,
{
    let _ = tokio::time::timeout(CLOSE_GRACE, async {
        while let Some(Ok(_)) = from.next().await {}
    })
    .await;
}

/// One spend record per session: its responses' usage, settled with the deployment and the
/// callers, then the record; dropping the charges frees the in-flight and parallel slots.
impl Drop for Session {
    fn drop(&mut self) {
        let shell = self.record.clone_shell();
        let mut record = std::mem::replace(&mut self.record, shell);
        record.usage = self.usage;
        self.charges.settle(&mut record);
        self.recorder.record(record);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_response_done_is_counted() {
        let done = r#"{"type":"response.done","response":{"usage":{"input_tokens":10,"output_tokens":3,"input_token_details":{"cached_tokens":2}}}}"#;
        let u = usage_of(&Message::text(done)).unwrap();
        assert_eq!(
            (u.prompt_tokens, u.completion_tokens, u.cached_tokens),
            (10, 3, 2)
        );
        let delta =
            r#"{"type":"response.output_text.delta","delta":"usage","usage":{"input_tokens":1}}"#;
        assert_eq!(usage_of(&Message::text(delta)), None);
        assert_eq!(usage_of(&Message::binary(done.as_bytes().to_vec())), None);
        assert_eq!((u + u).prompt_tokens, 20);
    }
}
