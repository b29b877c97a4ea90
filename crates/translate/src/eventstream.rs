//! AWS's binary event-stream framing (`application/vnd.amazon.eventstream`), as Bedrock's
//! ConverseStream and InvokeModelWithResponseStream send it (the latter's `chunk` events carry
//! the model's own JSON, base64-encoded in `{"bytes": …}`): each message is a 12-byte prelude (total length, headers length,
//! CRC32 of those 8 bytes), typed headers, the payload and a CRC32 of everything before it.
//! Both checksums are verified before a message is handed on, so a corrupted frame ends the
//! stream with an error instead of reaching the client.
//!
//! Hand-written rather than `aws-smithy-eventstream`, which brings `aws-smithy-types` and its
//! runtime along for ~150 lines of framing; `crc32fast` does the checksum.

use std::borrow::Cow;

use base64::Engine as _;
use bytes::{Buf, Bytes, BytesMut};
use serde::Deserialize;

/// Prelude: total length, headers length, prelude CRC.
const PRELUDE: usize = 12;
/// Prelude plus the trailing message CRC.
const OVERHEAD: usize = PRELUDE + 4;
/// Largest message accepted (AWS's limit is 16 MiB of payload plus 128 KiB of headers): a
/// prelude announcing more is refused before any of the message is waited for, so a decoder
/// holds at most this plus one frame.
pub const MAX_MESSAGE: usize = 16 * 1024 * 1024 + 128 * 1024 + OVERHEAD;

/// Why a frame was rejected. Any of these ends the stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// The prelude's CRC does not match its 8 bytes.
    #[error("event-stream prelude checksum mismatch")]
    PreludeCrc,
    /// The message CRC does not match the message.
    #[error("event-stream message checksum mismatch")]
    MessageCrc,
    /// Lengths that cannot describe a message.
    #[error("event-stream frame has invalid lengths")]
    Length,
    /// A header that runs past its section or has an unknown type.
    #[error("event-stream frame has a malformed header")]
    Header,
}

/// One decoded message: its string headers and payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    headers: Vec<(String, String)>,
    /// The payload (JSON for Bedrock).
    pub payload: Bytes,
}

impl Message {
    /// A string header's value (`:event-type`, `:message-type`, `:exception-type`, ...).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// Splits a byte stream into verified messages; bytes of an incomplete message wait for more.
/// After an error it holds nothing and gives that error again: a stream that broke once is
/// not buffered on, whoever keeps pushing into it.
#[derive(Debug, Default)]
pub struct Decoder {
    buf: BytesMut,
    failed: Option<FrameError>,
}

impl Decoder {
    /// Add bytes as they arrive (dropped once the stream failed).
    pub fn push(&mut self, bytes: &[u8]) {
        if self.failed.is_none() {
            self.buf.extend_from_slice(bytes);
        }
    }

    /// Whether bytes of an incomplete message are waiting.
    pub fn has_partial(&self) -> bool {
        !self.buf.is_empty()
    }

    /// The next complete message, `None` until one is complete.
    pub fn next_message(&mut self) -> Result<Option<Message>, FrameError> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let next = self.read_message();
        if let Err(e) = &next {
            self.failed = Some(e.clone());
            self.buf = BytesMut::new();
        }
        next
    }

    fn read_message(&mut self) -> Result<Option<Message>, FrameError> {
        if self.buf.len() < PRELUDE {
            return Ok(None);
        }
        let total = u32::from_be_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]);
        let headers_len = u32::from_be_bytes([self.buf[4], self.buf[5], self.buf[6], self.buf[7]]);
        let prelude_crc =
            u32::from_be_bytes([self.buf[8], self.buf[9], self.buf[10], self.buf[11]]);
        if crc32fast::hash(&self.buf[..8]) != prelude_crc {
            return Err(FrameError::PreludeCrc);
        }
        let (total, headers_len) = (total as usize, headers_len as usize);
        if !(OVERHEAD..=MAX_MESSAGE).contains(&total) || headers_len > total - OVERHEAD {
            return Err(FrameError::Length);
        }
        if self.buf.len() < total {
            return Ok(None);
        }
        let frame = self.buf.split_to(total).freeze();
        let body_end = total - 4;
        let message_crc = u32::from_be_bytes([
            frame[body_end],
            frame[body_end + 1],
            frame[body_end + 2],
            frame[body_end + 3],
        ]);
        if crc32fast::hash(&frame[..body_end]) != message_crc {
            return Err(FrameError::MessageCrc);
        }
        let headers = read_headers(&frame[PRELUDE..PRELUDE + headers_len])?;
        Ok(Some(Message {
            headers,
            payload: frame.slice(PRELUDE + headers_len..body_end),
        }))
    }
}

/// The string headers of a header section; headers of other types are checked and skipped.
fn read_headers(mut h: &[u8]) -> Result<Vec<(String, String)>, FrameError> {
    let mut out = Vec::with_capacity(4);
    while h.has_remaining() {
        let name_len = h.get_u8() as usize;
        if h.remaining() < name_len + 1 {
            return Err(FrameError::Header);
        }
        let name = String::from_utf8_lossy(&h[..name_len]).into_owned();
        h.advance(name_len);
        let fixed = match h.get_u8() {
            0 | 1 => Some(0),
            2 => Some(1),
            3 => Some(2),
            4 => Some(4),
            5 | 8 => Some(8),
            9 => Some(16),
            6 | 7 => None,
            _ => return Err(FrameError::Header),
        };
        let (len, string) = match fixed {
            Some(n) => (n, false),
            None => {
                if h.remaining() < 2 {
                    return Err(FrameError::Header);
                }
                (h.get_u16() as usize, true)
            }
        };
        if h.remaining() < len {
            return Err(FrameError::Header);
        }
        if string {
            out.push((name, String::from_utf8_lossy(&h[..len]).into_owned()));
        }
        h.advance(len);
    }
    Ok(out)
}

/// Encode one message with string headers (the mock's ConverseStream, and tests).
pub fn encode(headers: &[(&str, &str)], payload: &[u8]) -> Vec<u8> {
    let mut hb = Vec::with_capacity(64);
    for (name, value) in headers {
        hb.push(name.len().min(255) as u8);
        hb.extend_from_slice(&name.as_bytes()[..name.len().min(255)]);
        hb.push(7);
        let value = &value.as_bytes()[..value.len().min(u16::MAX as usize)];
        hb.extend_from_slice(&(value.len() as u16).to_be_bytes());
        hb.extend_from_slice(value);
    }
    let total = (OVERHEAD + hb.len() + payload.len()) as u32;
    let mut out = Vec::with_capacity(total as usize);
    out.extend_from_slice(&total.to_be_bytes());
    out.extend_from_slice(&(hb.len() as u32).to_be_bytes());
    let prelude_crc = crc32fast::hash(&out);
    out.extend_from_slice(&prelude_crc.to_be_bytes());
    out.extend_from_slice(&hb);
    out.extend_from_slice(payload);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_be_bytes());
    out
}

/// An exception message ending a stream (`kind`: AWS's exception type, e.g.
/// `throttlingException`), which AWS's SDKs raise as an error with `message`.
pub fn exception(kind: &str, message: &str) -> Vec<u8> {
    let payload = serde_json::json!({ "message": message }).to_string();
    encode(
        &[
            (":message-type", "exception"),
            (":exception-type", kind),
            (":content-type", "application/json"),
        ],
        payload.as_bytes(),
    )
}

/// A Bedrock stream event: `:event-type` and the JSON payload.
pub fn event(kind: &str, payload: &[u8]) -> Vec<u8> {
    encode(
        &[
            (":event-type", kind),
            (":content-type", "application/json"),
            (":message-type", "event"),
        ],
        payload,
    )
}

/// An InvokeModelWithResponseStream `chunk` event's payload.
#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(borrow)]
    bytes: Cow<'a, str>,
}

/// The model's own bytes in an InvokeModelWithResponseStream `chunk` payload
/// (`{"bytes": "<base64>", "p": "<padding>"}`), decoded into `out` (cleared first). False when
/// the payload is no such chunk.
pub fn chunk_bytes(payload: &[u8], out: &mut Vec<u8>) -> bool {
    out.clear();
    let Ok(chunk) = serde_json::from_slice::<Chunk<'_>>(payload) else {
        return false;
    };
    base64::engine::general_purpose::STANDARD
        .decode_vec(chunk.bytes.as_bytes(), out)
        .is_ok()
}

/// An InvokeModelWithResponseStream `chunk` event carrying `bytes` (the mock's, and tests),
/// with the random-length padding AWS adds so that sizes do not tell the content.
pub fn chunk(bytes: &[u8]) -> Vec<u8> {
    let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
    let pad = &"abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"[..(bytes.len() % 30) + 1];
    let payload = format!(r#"{{"bytes":"{b64}","p":"{pad}"}}"#);
    event("chunk", payload.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invoke_chunks_carry_the_models_bytes() {
        let inner =
            br#"{"type":"message_stop","amazon-bedrock-invocationMetrics":{"inputTokenCount":3}}"#;
        let mut d = Decoder::default();
        d.push(&chunk(inner));
        let m = d.next_message().unwrap().unwrap();
        assert_eq!(m.header(":event-type"), Some("chunk"));
        let mut out = vec![1, 2, 3];
        assert!(chunk_bytes(&m.payload, &mut out));
        assert_eq!(out, inner);
        assert!(!chunk_bytes(br#"{"message":"x"}"#, &mut out));
        assert!(!chunk_bytes(br#"{"bytes":"not base64!"}"#, &mut out));
    }

    /// AWS's published vector (aws-c-event-stream, `encoded/positive/all_headers` shape aside):
    /// the smallest message, no headers and no payload, is 16 bytes with these CRCs.
    #[test]
    fn empty_message_matches_aws_vector() {
        let m = encode(&[], b"");
        assert_eq!(
            m,
            [0, 0, 0, 0x10, 0, 0, 0, 0, 0x05, 0xc2, 0x48, 0xeb, 0x7d, 0x98, 0xc8, 0xff]
        );
        let mut d = Decoder::default();
        d.push(&m);
        let msg = d.next_message().unwrap().unwrap();
        assert!(msg.payload.is_empty());
    }

    /// AWS's `int32_header` style vector rebuilt: a payload `{'foo':'bar'}` with a
    /// `content-type` string header decodes back, split at every byte.
    #[test]
    fn round_trip_split_anywhere() {
        let m = encode(&[("content-type", "application/json")], b"{'foo':'bar'}");
        for cut in 0..m.len() {
            let mut d = Decoder::default();
            d.push(&m[..cut]);
            assert_eq!(d.next_message().unwrap(), None, "cut {cut}");
            d.push(&m[cut..]);
            let msg = d.next_message().unwrap().unwrap();
            assert_eq!(msg.header("content-type"), Some("application/json"));
            assert_eq!(&msg.payload[..], b"{'foo':'bar'}");
            assert!(!d.has_partial());
        }
    }

    #[test]
    fn bad_crcs_are_rejected() {
        let m = event("contentBlockDelta", br#"{"delta":{"text":"hi"}}"#);
        let mut bad_prelude = m.clone();
        bad_prelude[3] ^= 1;
        let mut d = Decoder::default();
        d.push(&bad_prelude);
        assert_eq!(d.next_message(), Err(FrameError::PreludeCrc));
        let mut bad_payload = m.clone();
        let at = bad_payload.len() - 6;
        bad_payload[at] ^= 0x20;
        let mut d = Decoder::default();
        d.push(&bad_payload);
        assert_eq!(d.next_message(), Err(FrameError::MessageCrc));
        let mut bad_crc = m;
        let last = bad_crc.len() - 1;
        bad_crc[last] ^= 0xff;
        let mut d = Decoder::default();
        d.push(&bad_crc);
        assert_eq!(d.next_message(), Err(FrameError::MessageCrc));
    }

    #[test]
    fn impossible_lengths_are_rejected() {
        // A prelude with a valid CRC but a total shorter than the overhead.
        let mut p = Vec::new();
        p.extend_from_slice(&8u32.to_be_bytes());
        p.extend_from_slice(&0u32.to_be_bytes());
        let crc = crc32fast::hash(&p);
        p.extend_from_slice(&crc.to_be_bytes());
        let mut d = Decoder::default();
        d.push(&p);
        assert_eq!(d.next_message(), Err(FrameError::Length));
    }

    #[test]
    fn two_messages_in_one_push() {
        let mut both = event("messageStart", br#"{"role":"assistant"}"#);
        both.extend(event("messageStop", br#"{"stopReason":"end_turn"}"#));
        let mut d = Decoder::default();
        d.push(&both);
        let a = d.next_message().unwrap().unwrap();
        let b = d.next_message().unwrap().unwrap();
        assert_eq!(a.header(":event-type"), Some("messageStart"));
        assert_eq!(b.header(":event-type"), Some("messageStop"));
        assert_eq!(d.next_message().unwrap(), None);
    }

    #[test]
    fn a_frame_past_the_limit_is_refused_at_its_prelude_and_nothing_is_held() {
        let mut p = Vec::new();
        p.extend_from_slice(&((MAX_MESSAGE + 1) as u32).to_be_bytes());
        p.extend_from_slice(&0u32.to_be_bytes());
        let crc = crc32fast::hash(&p);
        p.extend_from_slice(&crc.to_be_bytes());
        let mut d = Decoder::default();
        d.push(&p);
        assert_eq!(d.next_message(), Err(FrameError::Length));
        // Whoever keeps pushing, nothing more is held and the error stays.
        d.push(&vec![0u8; 1 << 20]);
        assert!(!d.has_partial());
        assert_eq!(d.next_message(), Err(FrameError::Length));
        // The largest frame allowed still waits for its bytes.
        let mut p = Vec::new();
        p.extend_from_slice(&(MAX_MESSAGE as u32).to_be_bytes());
        p.extend_from_slice(&0u32.to_be_bytes());
        let crc = crc32fast::hash(&p);
        p.extend_from_slice(&crc.to_be_bytes());
        let mut d = Decoder::default();
        d.push(&p);
        assert_eq!(d.next_message(), Ok(None));
    }
}
