//! Protobuf's wire format, as much of it as OTLP's spans need: tags, varints, fixed 64-bit
//! values, length-delimited bytes, and nested messages written in place. Written by hand (a
//! few message types; no codegen crate to compile into the binary).

use bytes::{BufMut, BytesMut};

/// Wire type of `int32`, `int64`, `uint32`, `uint64`, `bool` and enums.
const VARINT: u8 = 0;
/// Wire type of `fixed64` and `double`.
const I64: u8 = 1;
/// Wire type of `string`, `bytes` and nested messages.
const LEN: u8 = 2;

/// A length-delimited field whose contents `body` writes in place. The length goes in a
/// one-byte slot patched afterwards, and the contents shift right only when they turn out to
/// be 128 bytes or longer: no temporary buffer per message.
pub(super) fn nested(out: &mut BytesMut, field: u32, body: impl FnOnce(&mut BytesMut)) {
    tag(out, field, LEN);
    let slot = out.len();
    out.put_u8(0);
    body(out);
    let len = out.len() - slot - 1;
    let mut prefix = [0u8; 10];
    let n = varint_into(&mut prefix, len as u64);
    if n > 1 {
        let end = out.len();
        out.resize(end + n - 1, 0);
        out.copy_within(slot + 1..end, slot + n);
    }
    out[slot..slot + n].copy_from_slice(&prefix[..n]);
}

/// A string field of two parts joined by a space (`"{a} {b}"`), written without formatting a
/// string first.
pub(super) fn spaced(out: &mut BytesMut, field: u32, a: &str, b: &str) {
    tag(out, field, LEN);
    varint(out, (a.len() + 1 + b.len()) as u64);
    out.extend_from_slice(a.as_bytes());
    out.put_u8(b' ');
    out.extend_from_slice(b.as_bytes());
}

fn tag(out: &mut BytesMut, field: u32, wire: u8) {
    varint(out, (u64::from(field) << 3) | u64::from(wire));
}

/// `v` as a protobuf varint into `buf`; returns the bytes used.
fn varint_into(buf: &mut [u8; 10], mut v: u64) -> usize {
    let mut n = 0;
    while v >= 0x80 {
        buf[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    buf[n] = v as u8;
    n + 1
}

fn varint(out: &mut BytesMut, v: u64) {
    let mut buf = [0u8; 10];
    let n = varint_into(&mut buf, v);
    out.extend_from_slice(&buf[..n]);
}

/// A varint field: an integer, a `bool` (0 or 1) or an enum value.
pub(super) fn varint_field(out: &mut BytesMut, field: u32, v: u64) {
    tag(out, field, VARINT);
    varint(out, v);
}

/// A `fixed64` field.
pub(super) fn fixed64(out: &mut BytesMut, field: u32, v: u64) {
    tag(out, field, I64);
    out.extend_from_slice(&v.to_le_bytes());
}

/// A `double` field.
pub(super) fn double(out: &mut BytesMut, field: u32, v: f64) {
    fixed64(out, field, v.to_bits());
}

/// A `bytes` field.
pub(super) fn bytes_field(out: &mut BytesMut, field: u32, b: &[u8]) {
    tag(out, field, LEN);
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// A `string` field.
pub(super) fn string(out: &mut BytesMut, field: u32, s: &str) {
    bytes_field(out, field, s.as_bytes());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_fields_follow_the_protobuf_encoding() {
        let mut v = BytesMut::new();
        varint(&mut v, 300);
        assert_eq!(&v[..], [0xac, 0x02]);
        let mut m = BytesMut::new();
        string(&mut m, 1, "hi");
        assert_eq!(&m[..], [0x0a, 2, b'h', b'i']);
        let mut f = BytesMut::new();
        fixed64(&mut f, 7, 1);
        assert_eq!(&f[..], [0x39, 1, 0, 0, 0, 0, 0, 0, 0]);
        let mut d = BytesMut::new();
        double(&mut d, 4, 1.5);
        let mut want = vec![0x21];
        want.extend_from_slice(&1.5f64.to_le_bytes());
        assert_eq!(&d[..], want);
        let mut s = BytesMut::new();
        spaced(&mut s, 5, "chat", "m");
        assert_eq!(&s[..], [0x2a, 6, b'c', b'h', b'a', b't', b' ', b'm']);
    }

    #[test]
    fn nested_messages_get_their_length_in_front_short_or_long() {
        for len in [0usize, 1, 127, 128, 300, 16_384, 70_000] {
            let body = vec![7u8; len];
            let mut out = BytesMut::from(&b"x"[..]);
            nested(&mut out, 2, |o| o.extend_from_slice(&body));
            let mut want = BytesMut::from(&b"x"[..]);
            bytes_field(&mut want, 2, &body);
            assert_eq!(out, want, "length {len}");
        }
        // Nested twice, the inner one long: both lengths right.
        let mut out = BytesMut::new();
        nested(&mut out, 1, |o| {
            string(o, 1, "k");
            nested(o, 2, |i| i.extend_from_slice(&[1u8; 200]));
        });
        let mut inner = BytesMut::new();
        bytes_field(&mut inner, 2, &[1u8; 200]);
        let mut mid = BytesMut::new();
        string(&mut mid, 1, "k");
        mid.extend_from_slice(&inner);
        let mut want = BytesMut::new();
        bytes_field(&mut want, 1, &mid);
        assert_eq!(out, want);
    }
}
