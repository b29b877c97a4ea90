//! AWS Signature Version 4 for Bedrock requests: the canonical request, the string to sign and
//! the HMAC chain, per AWS's published algorithm and checked against its test suite.
//! The per-request work is one SHA-256 of the body and six HMACs; nothing else is built.
//!
//! Hand-written rather than `aws-sigv4`, which pulls `aws-smithy-runtime-api`,
//! `aws-credential-types` and their tree for what is ~150 lines over ring's SHA-256 and HMAC.

use std::fmt::Write as _;
use std::time::SystemTime;

use http::header::{HeaderName, HeaderValue, AUTHORIZATION, HOST};
use http::{HeaderMap, Uri};
use ring::digest::{digest, SHA256};
use ring::hmac::{self, HMAC_SHA256};

use sluice_core::trace_context::hex;
use sluice_core::Secret;

/// The algorithm name in the `Authorization` header.
const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// Static credentials for one deployment.
#[derive(Debug, Clone)]
pub struct Credentials {
    /// `aws_access_key_id`.
    pub access_key_id: Secret,
    /// `aws_secret_access_key`.
    pub secret_access_key: Secret,
    /// `aws_session_token` (temporary credentials).
    pub session_token: Option<Secret>,
}

/// Signs requests for one service in one region.
#[derive(Debug, Clone)]
pub struct Signer {
    credentials: Credentials,
    region: String,
    service: &'static str,
}

/// The date parts of a signature: `20150830T123600Z` and `20150830`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stamp {
    /// `x-amz-date`.
    pub datetime: String,
    /// The credential scope's date.
    pub date: String,
}

impl Stamp {
    /// The stamp of a moment (UTC).
    pub fn of(t: SystemTime) -> Self {
        let t = time::OffsetDateTime::from(t);
        let date = format!("{:04}{:02}{:02}", t.year(), u8::from(t.month()), t.day());
        let datetime = format!("{date}T{:02}{:02}{:02}Z", t.hour(), t.minute(), t.second());
        Self { datetime, date }
    }
}

fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(hmac::sign(&hmac::Key::new(HMAC_SHA256, key), data).as_ref());
    out
}

/// Hex SHA-256 of a payload.
pub fn payload_hash(body: &[u8]) -> String {
    hex(digest(&SHA256, body).as_ref())
}

/// URI-encode `s` the SigV4 way: unreserved characters kept, `/` kept when `keep_slash`,
/// everything else `%XX` in upper case.
pub fn uri_encode(s: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char);
            }
            b'/' if keep_slash => out.push('/'),
            _ => {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
    out
}

/// Decode `%XX` escapes (the inverse of [`uri_encode`]); a `%` not followed by two hex digits
/// stays as it is, and bytes that do not form UTF-8 are replaced.
pub fn uri_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 2 < b.len() {
            // Two hex digits: `from_str_radix` alone would take `%+1`.
            if let Some(v) = s
                .get(i + 1..i + 3)
                .filter(|h| h.bytes().all(|b| b.is_ascii_hexdigit()))
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                out.push(v);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The canonical query string: pairs sorted by name, then value.
fn canonical_query(query: &str) -> String {
    if query.is_empty() {
        return String::new();
    }
    let mut pairs: Vec<(&str, &str)> = query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .collect();
    pairs.sort_unstable();
    let mut out = String::with_capacity(query.len() + 1);
    for (i, (k, v)) in pairs.iter().enumerate() {
        if i > 0 {
            out.push('&');
        }
        out.push_str(k);
        out.push('=');
        out.push_str(v);
    }
    out
}

/// One request to sign: method, the path as sent (already URI-encoded), the raw query, the
/// headers to sign (lower-case names) and the payload's hash.
#[derive(Debug)]
pub struct Canonical<'a> {
    /// `GET`, `POST`, ...
    pub method: &'a str,
    /// The path as it goes on the wire.
    pub path: &'a str,
    /// The query, without `?`.
    pub query: &'a str,
    /// Headers to sign, names in lower case.
    pub headers: Vec<(String, String)>,
    /// Hex SHA-256 of the body.
    pub payload_hash: &'a str,
    /// Encode the path again for the canonical request (every service but S3).
    pub double_encode: bool,
}

impl Canonical<'_> {
    /// `host;x-amz-date;...`, sorted.
    fn signed_headers(&self) -> String {
        let mut names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        names.sort_unstable();
        names.dedup();
        names.join(";")
    }

    /// The canonical request. Services other than S3 sign the path encoded again (a Bedrock
    /// model id's `:` is `%3A` on the wire, `%253A` here); S3 signs it as sent.
    fn request(&self) -> String {
        let mut headers = self.headers.clone();
        headers.sort_by(|a, b| a.0.cmp(&b.0));
        let mut canonical_headers = String::with_capacity(256);
        let mut i = 0;
        while i < headers.len() {
            let name = &headers[i].0;
            canonical_headers.push_str(name);
            canonical_headers.push(':');
            let mut first = true;
            while i < headers.len() && &headers[i].0 == name {
                if !first {
                    canonical_headers.push(',');
                }
                first = false;
                let value = headers[i]
                    .1
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ");
                canonical_headers.push_str(&value);
                i += 1;
            }
            canonical_headers.push('\n');
        }
        let path = if self.path.is_empty() { "/" } else { self.path };
        format!(
            "{}\n{}\n{}\n{}\n{}\n{}",
            self.method,
            if self.double_encode {
                uri_encode(path, true)
            } else {
                path.to_owned()
            },
            canonical_query(self.query),
            canonical_headers,
            self.signed_headers(),
            self.payload_hash
        )
    }
}

/// The signature of a canonical request: the string to sign and the HMAC chain.
pub fn signature(
    secret: &str,
    stamp: &Stamp,
    region: &str,
    service: &str,
    canonical: &Canonical<'_>,
) -> String {
    let scope = format!("{}/{region}/{service}/aws4_request", stamp.date);
    let to_sign = format!(
        "{ALGORITHM}\n{}\n{scope}\n{}",
        stamp.datetime,
        hex(digest(&SHA256, canonical.request().as_bytes()).as_ref())
    );
    let k_date = hmac(format!("AWS4{secret}").as_bytes(), stamp.date.as_bytes());
    let k_region = hmac(&k_date, region.as_bytes());
    let k_service = hmac(&k_region, service.as_bytes());
    let k_signing = hmac(&k_service, b"aws4_request");
    hex(&hmac(&k_signing, to_sign.as_bytes()))
}

/// The `Authorization` header value.
pub fn authorization(
    access_key_id: &str,
    stamp: &Stamp,
    region: &str,
    service: &str,
    canonical: &Canonical<'_>,
    signature: &str,
) -> String {
    format!(
        "{ALGORITHM} Credential={access_key_id}/{}/{region}/{service}/aws4_request, \
         SignedHeaders={}, Signature={signature}",
        stamp.date,
        canonical.signed_headers()
    )
}

static X_AMZ_DATE: HeaderName = HeaderName::from_static("x-amz-date");
static X_AMZ_TOKEN: HeaderName = HeaderName::from_static("x-amz-security-token");
static X_AMZ_CONTENT: HeaderName = HeaderName::from_static("x-amz-content-sha256");

impl Signer {
    /// A signer for `service` (`bedrock`) in `region`.
    pub fn new(credentials: Credentials, region: String, service: &'static str) -> Self {
        Self {
            credentials,
            region,
            service,
        }
    }

    /// Add `x-amz-date`, the session token and `Authorization` to a POST's headers. Signs
    /// `host`, `content-type`, `x-amz-date` and the token.
    pub fn sign(&self, uri: &Uri, headers: &mut HeaderMap, body: &[u8], now: SystemTime) {
        self.sign_method("POST", uri, headers, body, now);
    }

    /// [`Signer::sign`] for any method. For S3 the payload hash is sent and signed as
    /// `x-amz-content-sha256` (S3 requires it) and the path is signed as sent.
    pub fn sign_method(
        &self,
        method: &'static str,
        uri: &Uri,
        headers: &mut HeaderMap,
        body: &[u8],
        now: SystemTime,
    ) {
        let s3 = self.service == "s3";
        let stamp = Stamp::of(now);
        let host = uri.authority().map(|a| a.as_str()).unwrap_or_default();
        let mut signed = vec![
            ("host".to_owned(), host.to_owned()),
            ("x-amz-date".to_owned(), stamp.datetime.clone()),
        ];
        if let Some(ct) = headers
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
        {
            signed.push(("content-type".to_owned(), ct.to_owned()));
        }
        if let Some(t) = &self.credentials.session_token {
            signed.push(("x-amz-security-token".to_owned(), t.expose().to_owned()));
        }
        let hash = payload_hash(body);
        if s3 {
            signed.push(("x-amz-content-sha256".to_owned(), hash.clone()));
            if let Ok(v) = HeaderValue::from_str(&hash) {
                headers.insert(X_AMZ_CONTENT.clone(), v);
            }
        }
        let canonical = Canonical {
            method,
            path: uri.path(),
            query: uri.query().unwrap_or_default(),
            headers: signed,
            payload_hash: &hash,
            double_encode: !s3,
        };
        let sig = signature(
            self.credentials.secret_access_key.expose(),
            &stamp,
            &self.region,
            self.service,
            &canonical,
        );
        let auth = authorization(
            self.credentials.access_key_id.expose(),
            &stamp,
            &self.region,
            self.service,
            &canonical,
            &sig,
        );
        if let Ok(v) = HeaderValue::from_str(&stamp.datetime) {
            headers.insert(X_AMZ_DATE.clone(), v);
        }
        if let Some(Ok(mut v)) = self
            .credentials
            .session_token
            .as_ref()
            .map(|t| HeaderValue::from_str(t.expose()))
        {
            v.set_sensitive(true);
            headers.insert(X_AMZ_TOKEN.clone(), v);
        }
        if let Ok(mut v) = HeaderValue::from_str(&auth) {
            v.set_sensitive(true);
            headers.insert(AUTHORIZATION, v);
        }
        if let Ok(v) = HeaderValue::from_str(host) {
            headers.insert(HOST, v);
        }
    }
}

/// Why a signed request was refused (the mock's check, in AWS's own words).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    /// No or unparsable `Authorization`.
    #[error("Missing Authentication Token")]
    Missing,
    /// An access key other than the expected one.
    #[error("The security token included in the request is invalid.")]
    UnknownKey,
    /// The signature does not match.
    #[error(
        "The request signature we calculated does not match the signature you provided. \
         Check your AWS Secret Access Key and signing method."
    )]
    Mismatch,
}

/// Check a request's SigV4 signature against the expected key pair: the server side, used by
/// the mock so that a wrong signature fails the tests.
pub fn verify(
    access_key_id: &str,
    secret: &str,
    path: &str,
    query: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(), VerifyError> {
    let auth = headers
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|a| a.strip_prefix(ALGORITHM))
        .ok_or(VerifyError::Missing)?;
    let field = |name: &str| {
        auth.split(',')
            .map(str::trim)
            .find_map(|p| p.strip_prefix(name))
    };
    let credential = field("Credential=").ok_or(VerifyError::Missing)?;
    let signed = field("SignedHeaders=").ok_or(VerifyError::Missing)?;
    let given = field("Signature=").ok_or(VerifyError::Missing)?;
    let mut scope = credential.split('/');
    let (Some(key), Some(date), Some(region), Some(service)) =
        (scope.next(), scope.next(), scope.next(), scope.next())
    else {
        return Err(VerifyError::Missing);
    };
    if key != access_key_id {
        return Err(VerifyError::UnknownKey);
    }
    let datetime = headers
        .get(&X_AMZ_DATE)
        .and_then(|v| v.to_str().ok())
        .ok_or(VerifyError::Missing)?;
    let mut signed_headers = Vec::new();
    for name in signed.split(';') {
        for v in headers.get_all(name) {
            signed_headers.push((name.to_owned(), v.to_str().unwrap_or_default().to_owned()));
        }
    }
    let hash = payload_hash(body);
    let canonical = Canonical {
        method: "POST",
        path,
        query,
        headers: signed_headers,
        payload_hash: &hash,
        double_encode: true,
    };
    let stamp = Stamp {
        datetime: datetime.to_owned(),
        date: date.to_owned(),
    };
    let expected = signature(secret, &stamp, region, service, &canonical);
    if crate::secret_eq(expected.as_bytes(), given.as_bytes()) {
        Ok(())
    } else {
        Err(VerifyError::Mismatch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECRET: &str = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY";

    fn stamp() -> Stamp {
        Stamp {
            datetime: "20150830T123600Z".into(),
            date: "20150830".into(),
        }
    }

    fn vector(method: &str, query: &str, extra: &[(&str, &str)], body: &[u8]) -> String {
        let mut headers = vec![
            ("host".to_owned(), "example.amazonaws.com".to_owned()),
            ("x-amz-date".to_owned(), "20150830T123600Z".to_owned()),
        ];
        headers.extend(
            extra
                .iter()
                .map(|(n, v)| ((*n).to_owned(), (*v).to_owned())),
        );
        let hash = payload_hash(body);
        let c = Canonical {
            method,
            path: "/",
            query,
            headers,
            payload_hash: &hash,
            double_encode: true,
        };
        let sig = signature(SECRET, &stamp(), "us-east-1", "service", &c);
        authorization("AKIDEXAMPLE", &stamp(), "us-east-1", "service", &c, &sig)
    }

    /// AWS's Signature Version 4 test suite (`get-vanilla`, `get-vanilla-query-order-key-case`,
    /// `post-x-www-form-urlencoded`): credentials AKIDEXAMPLE, 2015-08-30T12:36:00Z,
    /// us-east-1, service `service`.
    #[test]
    fn aws_test_suite_vectors() {
        let prefix =
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, ";
        assert_eq!(
            vector("GET", "", &[], b""),
            format!("{prefix}SignedHeaders=host;x-amz-date, Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31")
        );
        assert_eq!(
            vector("GET", "Param2=value2&Param1=value1", &[], b""),
            format!("{prefix}SignedHeaders=host;x-amz-date, Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500")
        );
        assert_eq!(
            vector(
                "POST",
                "",
                &[("content-type", "application/x-www-form-urlencoded")],
                b"Param1=value1"
            ),
            format!("{prefix}SignedHeaders=content-type;host;x-amz-date, Signature=ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a")
        );
    }

    #[test]
    fn model_ids_are_encoded_twice_in_the_canonical_path() {
        let c = Canonical {
            method: "POST",
            path: "/model/anthropic.claude-3-5-sonnet-20240620-v1%3A0/converse",
            query: "",
            headers: vec![("host".into(), "h".into())],
            payload_hash: "x",
            double_encode: true,
        };
        assert!(c
            .request()
            .contains("/model/anthropic.claude-3-5-sonnet-20240620-v1%253A0/converse\n"));
        assert_eq!(
            uri_encode("us.anthropic/x:0", false),
            "us.anthropic%2Fx%3A0"
        );
    }

    /// Found by fuzzing (sigv4, against `percent-encoding`): `%+1` decoded to a control
    /// character; only `%` and two hex digits is an escape.
    #[test]
    fn only_two_hex_digits_are_an_escape() {
        assert_eq!(uri_decode("a%+1b%2B%2"), "a%+1b+%2");
        assert_eq!(uri_decode("%-1%4g"), "%-1%4g");
    }

    #[test]
    fn stamps_are_utc() {
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_440_938_160);
        assert_eq!(stamp(), Stamp::of(t));
    }

    #[test]
    fn signed_requests_verify_and_tampering_fails() {
        let signer = Signer::new(
            Credentials {
                access_key_id: Secret::new("AKIDEXAMPLE"),
                secret_access_key: Secret::new(SECRET),
                session_token: Some(Secret::new("token")),
            },
            "us-west-2".into(),
            "bedrock",
        );
        let uri: Uri = "http://127.0.0.1:9/model/a%3A0/converse".parse().unwrap();
        let mut h = HeaderMap::new();
        h.insert(
            http::header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        signer.sign(&uri, &mut h, b"{}", SystemTime::now());
        assert_eq!(h.get("x-amz-security-token").unwrap(), "token");
        let path = uri.path();
        assert_eq!(verify("AKIDEXAMPLE", SECRET, path, "", &h, b"{}"), Ok(()));
        assert_eq!(
            verify("AKIDEXAMPLE", SECRET, path, "", &h, b"{ }"),
            Err(VerifyError::Mismatch)
        );
        assert_eq!(
            verify("AKIDEXAMPLE", "other", path, "", &h, b"{}"),
            Err(VerifyError::Mismatch)
        );
        assert_eq!(
            verify("AKIDOTHER", SECRET, path, "", &h, b"{}"),
            Err(VerifyError::UnknownKey)
        );
        assert_eq!(
            verify("AKIDEXAMPLE", SECRET, "/model/a:0/converse", "", &h, b"{}"),
            Err(VerifyError::Mismatch)
        );
    }
}
