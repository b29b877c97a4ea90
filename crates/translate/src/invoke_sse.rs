//! Bedrock's InvokeModelWithResponseStream told as the Messages API's server-sent events: each
//! `chunk` carries one of Anthropic's own stream events, base64-encoded, so a Claude client's
//! call relayed to Claude on Bedrock gets those events byte for byte (`event: <type>` and
//! `data: <the event>`), with nothing modelled or lost in between. An exception AWS sends
//! mid-stream, or a frame that fails its checksum, ends the stream with Anthropic's `error`
//! event.

use bytes::{BufMut, Bytes, BytesMut};
use serde::Deserialize;

use crate::eventstream::{chunk_bytes, Decoder};
use crate::stream::{Rewrite, TranslatedBody};

/// The `type` of an Anthropic stream event.
#[derive(Deserialize)]
struct Kind<'a> {
    #[serde(rename = "type", borrow)]
    kind: &'a str,
}

/// What `feed` turns event-stream bytes into.
#[derive(Debug, Default)]
pub struct InvokeSse {
    decoder: Decoder,
    /// Reused for each chunk's decoded event.
    event: Vec<u8>,
    /// The stream ended with an error event: nothing more goes out.
    done: bool,
}

impl InvokeSse {
    /// The SSE text for `bytes` of the upstream's event stream (empty until a frame is whole).
    pub fn feed(&mut self, bytes: &[u8]) -> Bytes {
        if self.done {
            return Bytes::new();
        }
        self.decoder.push(bytes);
        let mut out = BytesMut::new();
        loop {
            match self.decoder.next_message() {
                Ok(None) => break,
                Ok(Some(m)) => {
                    if m.header(":message-type") == Some("exception") {
                        let kind = m.header(":exception-type").unwrap_or("exception");
                        let message = String::from_utf8_lossy(&m.payload).into_owned();
                        self.error(&mut out, kind, &message);
                        break;
                    }
                    if m.header(":event-type") != Some("chunk")
                        || !chunk_bytes(&m.payload, &mut self.event)
                    {
                        continue;
                    }
                    let Ok(k) = serde_json::from_slice::<Kind<'_>>(&self.event) else {
                        continue;
                    };
                    out.put_slice(b"event: ");
                    out.put_slice(k.kind.as_bytes());
                    out.put_slice(b"\ndata: ");
                    out.put_slice(&self.event);
                    out.put_slice(b"\n\n");
                }
                Err(e) => {
                    self.error(&mut out, "api_error", &e.to_string());
                    break;
                }
            }
        }
        out.freeze()
    }

    /// The upstream ended: an incomplete frame is an error.
    pub fn finish(&mut self) -> Bytes {
        let mut out = BytesMut::new();
        if !self.done && self.decoder.has_partial() {
            self.error(
                &mut out,
                "api_error",
                "the stream ended inside an event-stream frame",
            );
        }
        out.freeze()
    }

    fn error(&mut self, out: &mut BytesMut, kind: &str, message: &str) {
        let kind = match kind {
            "throttlingException" | "serviceUnavailableException" => "overloaded_error",
            "validationException" => "invalid_request_error",
            _ => "api_error",
        };
        let event =
            serde_json::json!({"type": "error", "error": {"type": kind, "message": message}});
        out.put_slice(b"event: error\ndata: ");
        out.put_slice(event.to_string().as_bytes());
        out.put_slice(b"\n\n");
        self.done = true;
    }
}

/// A body of InvokeModelWithResponseStream frames read as Anthropic's SSE.
pub type InvokeSseBody<B> = TranslatedBody<B, InvokeSse>;

impl Rewrite for InvokeSse {
    fn feed(&mut self, bytes: &[u8]) -> Bytes {
        InvokeSse::feed(self, bytes)
    }

    fn finish(&mut self) -> Bytes {
        InvokeSse::finish(self)
    }

    fn ended(&self) -> bool {
        self.done
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::eventstream::{chunk, encode};

    #[test]
    fn chunks_become_anthropics_own_events_at_any_frame_size() {
        let start = br#"{"type":"message_start","message":{"id":"m","usage":{"input_tokens":3}}}"#;
        let stop = br#"{"type":"message_stop","new_future_field":1}"#;
        let mut wire = chunk(start);
        wire.extend(chunk(stop));
        for cut in [1, 7, wire.len()] {
            let mut sse = InvokeSse::default();
            let mut out = Vec::new();
            for piece in wire.chunks(cut) {
                out.extend_from_slice(&sse.feed(piece));
            }
            out.extend_from_slice(&sse.finish());
            let text = String::from_utf8(out).unwrap();
            assert_eq!(
                text,
                format!(
                    "event: message_start\ndata: {}\n\nevent: message_stop\ndata: {}\n\n",
                    std::str::from_utf8(start).unwrap(),
                    std::str::from_utf8(stop).unwrap()
                ),
                "cut {cut}"
            );
        }
    }

    #[test]
    fn an_exception_or_a_broken_frame_ends_with_an_error_event() {
        let exception = encode(
            &[
                (":message-type", "exception"),
                (":exception-type", "throttlingException"),
            ],
            br#"{"message":"slow down"}"#,
        );
        let mut sse = InvokeSse::default();
        let text = String::from_utf8(sse.feed(&exception).to_vec()).unwrap();
        assert!(text.starts_with("event: error\n"), "{text}");
        assert!(text.contains("overloaded_error"), "{text}");
        assert!(
            sse.feed(&chunk(br#"{"type":"ping"}"#)).is_empty(),
            "nothing after"
        );

        let mut broken = chunk(br#"{"type":"ping"}"#);
        let last = broken.len() - 1;
        broken[last] ^= 0xff;
        let mut sse = InvokeSse::default();
        let text = String::from_utf8(sse.feed(&broken).to_vec()).unwrap();
        assert!(text.contains("checksum"), "{text}");
        let mut cut = InvokeSse::default();
        assert!(cut.feed(&chunk(br#"{"type":"ping"}"#)[..10]).is_empty());
        assert!(String::from_utf8(cut.finish().to_vec())
            .unwrap()
            .contains("ended inside"));
    }
}
