//! The fuzz target over SigV4 canonicalisation (fuzz/README.md): percent-encoding both ways
//! and a request signed from arbitrary parts, checked by the server side's own verification.

use std::time::SystemTime;

use http::header::{HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderMap, Uri};

use sluice_core::Secret;

use crate::sigv4::{uri_decode, uri_encode, verify, Credentials, Signer};

const KEY_ID: &str = "AKIDEXAMPLE";

/// The input is up to five lines: path, query, content type, secret, body. Encoding then
/// decoding gives the text back, and decoding agrees with the `percent-encoding` crate's; a
/// request signed from the parts verifies, and fails once its body changes; an arbitrary
/// `Authorization` header never verifies.
pub fn sigv4(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    for keep_slash in [false, true] {
        let encoded = uri_encode(&text, keep_slash);
        assert!(encoded.bytes().all(|b| b.is_ascii_alphanumeric()
            || b"-_.~%".contains(&b)
            || (keep_slash && b == b'/')));
        assert_eq!(uri_decode(&encoded), text);
    }
    assert_eq!(
        uri_decode(&text),
        percent_encoding::percent_decode_str(&text).decode_utf8_lossy()
    );

    let parts: Vec<&[u8]> = data.splitn(5, |b| *b == b'\n').collect();
    let field = |i: usize| String::from_utf8_lossy(parts.get(i).copied().unwrap_or_default());
    let (path, query, content_type, secret) = (field(0), field(1), field(2), field(3));
    let body = parts.get(4).copied().unwrap_or_default();
    let Ok(uri) = format!("http://bedrock.example/{path}?{query}").parse::<Uri>() else {
        return;
    };
    let mut headers = HeaderMap::new();
    if let Ok(ct) = HeaderValue::from_str(&content_type) {
        headers.insert(CONTENT_TYPE, ct);
    }
    let signer = Signer::new(
        Credentials {
            access_key_id: Secret::new(KEY_ID),
            secret_access_key: Secret::new(secret.clone().into_owned()),
            session_token: None,
        },
        "us-east-1".into(),
        "bedrock",
    );
    signer.sign(&uri, &mut headers, body, SystemTime::now());
    let (path, query) = (uri.path(), uri.query().unwrap_or_default());
    assert_eq!(verify(KEY_ID, &secret, path, query, &headers, body), Ok(()));
    let mut other = body.to_vec();
    other.push(b'x');
    assert!(verify(KEY_ID, &secret, path, query, &headers, &other).is_err());
    if let Ok(auth) = HeaderValue::from_bytes(data) {
        headers.insert(AUTHORIZATION, auth);
        assert!(verify(KEY_ID, &secret, path, query, &headers, body).is_err());
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn sigv4_corpus() {
        sluice_core::fuzz::replay(env!("CARGO_MANIFEST_DIR"), "sigv4", super::sigv4);
    }
}
