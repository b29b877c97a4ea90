//! AWS Signature Version 4 for one request with a fully hashed payload (S3-compatible stores).
//! Kept behind [`sign`] so that the Bedrock provider's signer and this one can become one.

use sha2::{Digest, Sha256};
use std::time::SystemTime;

/// The credentials and scope of a signature.
#[derive(Debug)]
pub struct Credentials<'a> {
    /// Access key id.
    pub access_key: &'a str,
    /// Secret access key.
    pub secret_key: &'a str,
    /// Session token, for temporary credentials.
    pub session_token: Option<&'a str>,
    /// Region.
    pub region: &'a str,
    /// Service (`s3`).
    pub service: &'a str,
}

/// Headers to add to the request: `x-amz-date`, `x-amz-content-sha256`,
/// `x-amz-security-token` (when set) and `authorization`. `headers` are the other headers to
/// sign (lower-case names; `host` must be among them); `path` is already URI-encoded.
pub fn sign(
    c: &Credentials<'_>,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    payload: &[u8],
    now: SystemTime,
) -> Vec<(&'static str, String)> {
    let (date, amz_date) = stamps(now);
    let payload_hash = hex(&Sha256::digest(payload));
    let mut all: Vec<(String, String)> = headers
        .iter()
        .map(|(k, v)| (k.to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    all.push(("x-amz-content-sha256".into(), payload_hash.clone()));
    all.push(("x-amz-date".into(), amz_date.clone()));
    if let Some(t) = c.session_token {
        all.push(("x-amz-security-token".into(), t.to_owned()));
    }
    all.sort();
    let canonical_headers: String = all.iter().map(|(k, v)| format!("{k}:{v}\n")).collect();
    let signed: Vec<&str> = all.iter().map(|(k, _)| k.as_str()).collect();
    let signed = signed.join(";");
    let canonical = format!("{method}\n{path}\n\n{canonical_headers}\n{signed}\n{payload_hash}");
    let scope = format!("{date}/{}/{}/aws4_request", c.region, c.service);
    let to_sign = format!(
        "AWS4-HMAC-SHA256\n{amz_date}\n{scope}\n{}",
        hex(&Sha256::digest(canonical.as_bytes()))
    );
    let key = signing_key(c.secret_key, &date, c.region, c.service);
    let signature = hex(&hmac(&key, to_sign.as_bytes()));
    let mut out = vec![
        ("x-amz-date", amz_date),
        ("x-amz-content-sha256", payload_hash),
        (
            "authorization",
            format!(
                "AWS4-HMAC-SHA256 Credential={}/{scope}, SignedHeaders={signed}, Signature={signature}",
                c.access_key
            ),
        ),
    ];
    if let Some(t) = c.session_token {
        out.push(("x-amz-security-token", t.to_owned()));
    }
    out
}

fn signing_key(secret: &str, date: &str, region: &str, service: &str) -> [u8; 32] {
    let k = hmac(format!("AWS4{secret}").as_bytes(), date.as_bytes());
    let k = hmac(&k, region.as_bytes());
    let k = hmac(&k, service.as_bytes());
    hmac(&k, b"aws4_request")
}

/// HMAC-SHA256 (RFC 2104).
fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    let mut block = [0u8; 64];
    if key.len() > 64 {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let mut inner = Sha256::new();
    inner.update(block.map(|b| b ^ 0x36));
    inner.update(data);
    let mut outer = Sha256::new();
    outer.update(block.map(|b| b ^ 0x5c));
    outer.update(inner.finalize());
    outer.finalize().into()
}

/// `YYYYMMDD` and `YYYYMMDDTHHMMSSZ`.
fn stamps(now: SystemTime) -> (String, String) {
    let secs = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let t = time::OffsetDateTime::from_unix_timestamp(i64::try_from(secs).unwrap_or(0))
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    let date = format!("{:04}{:02}{:02}", t.year(), u8::from(t.month()), t.day());
    let full = format!("{date}T{:02}{:02}{:02}Z", t.hour(), t.minute(), t.second());
    (date, full)
}

fn hex(b: &[u8]) -> String {
    super::super::trace_context::hex(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hmac_matches_rfc_4231() {
        let got = hmac(&[0x0b; 20], b"Hi There");
        assert_eq!(
            hex(&got),
            "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"
        );
    }

    #[test]
    fn signing_key_matches_the_aws_example() {
        let k = signing_key(
            "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            "20120215",
            "us-east-1",
            "iam",
        );
        assert_eq!(
            hex(&k),
            "f4780e2d9f65fa895f9c67b32ce1baf0b0d8a43505a000a1a9e090d414db404d"
        );
    }

    #[test]
    fn the_signature_covers_the_headers_and_scope() {
        let c = Credentials {
            access_key: "AKID",
            secret_key: "secret",
            session_token: Some("tok"),
            region: "eu-west-1",
            service: "s3",
        };
        let now = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        let h = sign(&c, "PUT", "/b/k.json", &[("host", "s3.local")], b"[]", now);
        let auth = &h.iter().find(|(k, _)| *k == "authorization").unwrap().1;
        assert!(auth.starts_with("AWS4-HMAC-SHA256 Credential=AKID/20231114/eu-west-1/s3/aws4_request, SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-security-token, Signature="), "{auth}");
        assert!(!auth.contains("secret"));
        let again = sign(&c, "PUT", "/b/k.json", &[("host", "s3.local")], b"[1]", now);
        assert_ne!(h, again);
    }
}
