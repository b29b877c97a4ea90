//! Verifying one compact JWS against a key set, then its registered claims, with `now` passed
//! in so every time rule is testable.

use std::sync::Arc;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Map, Value};

use crate::alg::Alg;
use crate::error::JwtError;
use crate::jwks::Jwks;

/// A verified token's claims (its whole payload), shared: the cache and every request holding
/// the same token point at one map.
pub type Claims = Arc<Map<String, Value>>;

/// Longest token looked at. Real tokens are well under 8 KiB (they travel in a header); the cap
/// keeps a hostile megabyte from being hashed and decoded.
pub const MAX_TOKEN_LEN: usize = 16 * 1024;

/// What a token's claims must satisfy beyond its signature: LiteLLM's `JWT_AUDIENCE`,
/// `JWT_ISSUER` and leeway, plus whether `exp` is required.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Validation {
    /// Accepted audiences; the token's `aud` (a string or an array) must name at least one.
    /// Empty: `aud` is not checked (LiteLLM without `JWT_AUDIENCE`; it warns, and so should
    /// the gateway, since any token from the IdP then passes).
    pub audiences: Vec<String>,
    /// The issuer `iss` must equal; `None`: not checked.
    pub issuer: Option<String>,
    /// Seconds of clock skew tolerated on `exp`, `nbf` and `iat`. LiteLLM uses 0.
    pub leeway_secs: u64,
    /// Refuse tokens without `exp`. On by default: a token that never expires stays valid until
    /// its key is rotated out. LiteLLM (PyJWT) does not require it; turn this off to match.
    pub require_exp: bool,
}

impl Default for Validation {
    fn default() -> Self {
        Self {
            audiences: Vec::new(),
            issuer: None,
            leeway_secs: 0,
            require_exp: true,
        }
    }
}

/// The header members sluice reads; everything else (`cty`, and `jku`, `jwk`, `x5u`,
/// `x5c`, which would let a token bring its own key) is ignored. Duplicate members make serde
/// fail, so two parsers cannot read two different `alg`s.
#[derive(Deserialize)]
struct Header<'a> {
    #[serde(borrow)]
    alg: std::borrow::Cow<'a, str>,
    #[serde(borrow, default)]
    kid: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, default)]
    typ: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    crit: Option<serde::de::IgnoredAny>,
}

/// Verifies `token` (a compact JWS, without `Bearer `) against `keys` and `rules` at `now`
/// (Unix seconds), and returns its claims. No cache: [`crate::Keys::verify`] is the per-request
/// entry point; this is for one-off checks and benchmarks.
pub fn verify(token: &str, keys: &Jwks, rules: &Validation, now: u64) -> Result<Claims, JwtError> {
    verify_until(token, keys, rules, now).map(|(claims, _)| claims)
}

/// [`verify`], also returning the first second at which the token stops being valid
/// (`exp + leeway`; `u64::MAX` without `exp`), which bounds its life in the cache.
pub(crate) fn verify_until(
    token: &str,
    keys: &Jwks,
    rules: &Validation,
    now: u64,
) -> Result<(Claims, u64), JwtError> {
    if token.len() > MAX_TOKEN_LEN {
        return Err(JwtError::Malformed("too long"));
    }
    let (signing_input, signature) = token
        .rsplit_once('.')
        .ok_or(JwtError::Malformed("expected three dot-separated segments"))?;
    let (header, payload) = signing_input
        .split_once('.')
        .ok_or(JwtError::Malformed("expected three dot-separated segments"))?;
    if payload.contains('.') {
        return Err(JwtError::Malformed("expected three dot-separated segments"));
    }

    let header = decode(header, "header is not base64url")?;
    let header: Header<'_> = serde_json::from_slice(&header)
        .map_err(|_| JwtError::Malformed("header is not a JSON object with an alg"))?;
    let alg = Alg::from_name(&header.alg).map_err(JwtError::UnsupportedAlgorithm)?;
    if header.crit.is_some() {
        return Err(JwtError::UnsupportedCritical);
    }
    if header.typ.as_deref().is_some_and(is_id_jag) {
        return Err(JwtError::NotABearerToken);
    }
    let key = keys.select(header.kid.as_deref(), alg)?;

    let signature = decode(signature, "signature is not base64url")?;
    key.verify(alg, signing_input.as_bytes(), &signature)?;

    let payload = decode(payload, "payload is not base64url")?;
    let claims: Map<String, Value> = serde_json::from_slice(&payload)
        .map_err(|_| JwtError::Malformed("payload is not a JSON object"))?;
    let valid_until = check_claims(&claims, rules, now)?;
    Ok((Arc::new(claims), valid_until))
}

/// An ID-JAG (`typ: oauth-id-jag+jwt`) is an authorization grant the same IdP signs, to be
/// redeemed at a token endpoint; LiteLLM refuses it as a bearer token, and so does sluice.
/// Media types compare case-insensitively, with or without `application/` (RFC 7515 §4.1.9).
fn is_id_jag(typ: &str) -> bool {
    let bare = match (typ.get(..12), typ.get(12..)) {
        (Some(prefix), Some(rest)) if prefix.eq_ignore_ascii_case("application/") => rest,
        _ => typ,
    };
    bare.eq_ignore_ascii_case("oauth-id-jag+jwt")
}

fn decode(segment: &str, what: &'static str) -> Result<Vec<u8>, JwtError> {
    URL_SAFE_NO_PAD
        .decode(segment)
        .map_err(|_| JwtError::Malformed(what))
}

/// Checks the registered claims PyJWT checks, the way it does: `exp` refuses once
/// `now >= exp + leeway`, `nbf` and `iat` while `now + leeway < value`. Returns the first
/// invalid second (`exp + leeway`, or `u64::MAX` without `exp`).
fn check_claims(
    claims: &Map<String, Value>,
    rules: &Validation,
    now: u64,
) -> Result<u64, JwtError> {
    let now = i128::from(now);
    let leeway = i128::from(rules.leeway_secs);
    let valid_until = match numeric_date(claims, "exp")? {
        Some(exp) => {
            let until = i128::from(exp) + leeway;
            if now >= until {
                return Err(JwtError::Expired);
            }
            u64::try_from(until).unwrap_or(u64::MAX)
        }
        None if rules.require_exp => return Err(JwtError::MissingClaim("exp")),
        None => u64::MAX,
    };
    if let Some(nbf) = numeric_date(claims, "nbf")? {
        if i128::from(nbf) > now + leeway {
            return Err(JwtError::NotYetValid);
        }
    }
    if let Some(iat) = numeric_date(claims, "iat")? {
        if i128::from(iat) > now + leeway {
            return Err(JwtError::IssuedInFuture);
        }
    }
    if !rules.audiences.is_empty() {
        let accepted = |v: &Value| -> Result<bool, JwtError> {
            let s = v.as_str().ok_or(JwtError::InvalidClaim("aud"))?;
            Ok(rules.audiences.iter().any(|a| a == s))
        };
        let matched = match claims.get("aud") {
            None => return Err(JwtError::MissingClaim("aud")),
            Some(Value::Array(list)) => {
                let mut any = false;
                for v in list {
                    any |= accepted(v)?;
                }
                any
            }
            Some(v) => accepted(v)?,
        };
        if !matched {
            return Err(JwtError::WrongAudience);
        }
    }
    if let Some(issuer) = &rules.issuer {
        match claims.get("iss") {
            None => return Err(JwtError::MissingClaim("iss")),
            Some(Value::String(s)) if s == issuer => {}
            Some(Value::String(_)) => return Err(JwtError::WrongIssuer),
            Some(_) => return Err(JwtError::InvalidClaim("iss")),
        }
    }
    Ok(valid_until)
}

/// A NumericDate claim as whole seconds: a JSON number (fractions truncated, as PyJWT's
/// `int()` does), anything else refused.
fn numeric_date(claims: &Map<String, Value>, name: &'static str) -> Result<Option<i64>, JwtError> {
    let Some(v) = claims.get(name) else {
        return Ok(None);
    };
    let n = v.as_number().ok_or(JwtError::InvalidClaim(name))?;
    if let Some(i) = n.as_i64() {
        return Ok(Some(i));
    }
    if n.as_u64().is_some() {
        return Ok(Some(i64::MAX));
    }
    match n.as_f64() {
        // `as` saturates at i64's bounds.
        Some(f) if f.is_finite() => Ok(Some(f.trunc() as i64)),
        _ => Err(JwtError::InvalidClaim(name)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alg::AlgRefusal;
    use crate::test_keys::{b64, Signer, EC_KID, RSA_KID};
    use serde_json::json;

    const NOW: u64 = 1_800_000_000;

    fn claims() -> Value {
        json!({"sub": "u1", "exp": NOW + 60, "iat": NOW - 5, "aud": "sluice", "iss": "https://idp"})
    }

    fn rules() -> Validation {
        Validation::default()
    }

    #[test]
    fn valid_es256_and_rs256_tokens_verify_and_return_their_claims() {
        let ec = Signer::ec();
        let rsa = Signer::rsa();
        let set = Signer::set(&[&ec, &rsa]);
        for s in [&ec, &rsa] {
            let t = s.sign(&claims());
            let got = verify(&t, &set, &rules(), NOW).unwrap();
            assert_eq!(Value::Object((*got).clone()), claims());
        }
        // PS256 with the same RSA key (no `alg` pinned in its JWK).
        let t = rsa.sign_as("PS256", &claims());
        assert!(verify(&t, &set, &rules(), NOW).is_ok());
    }

    #[test]
    fn unsigned_and_hmac_tokens_are_refused_before_any_key_is_looked_at() {
        let ec = Signer::ec();
        let set = Signer::set(&[&ec]);
        let body = b64(&serde_json::to_vec(&claims()).unwrap());
        let none = format!("{}.{body}.", b64(br#"{"alg":"none","kid":"ec-1"}"#));
        assert_eq!(
            verify(&none, &set, &rules(), NOW).unwrap_err(),
            JwtError::UnsupportedAlgorithm(AlgRefusal::Unsigned)
        );
        // An HS256 token "signed" with the public key's bytes: the classic confusion.
        let hs = format!(
            "{}.{body}.{}",
            b64(br#"{"alg":"HS256","kid":"ec-1"}"#),
            b64(b"mac")
        );
        assert_eq!(
            verify(&hs, &set, &rules(), NOW).unwrap_err(),
            JwtError::UnsupportedAlgorithm(AlgRefusal::Symmetric)
        );
        let unknown = format!("{}.{body}.{}", b64(br#"{"alg":"ES512"}"#), b64(b"s"));
        assert_eq!(
            verify(&unknown, &set, &rules(), NOW).unwrap_err(),
            JwtError::UnsupportedAlgorithm(AlgRefusal::Unknown)
        );
        let e = verify(&hs, &set, &rules(), NOW).unwrap_err();
        assert!(e.to_string().contains("HMAC"), "{e}");
    }

    #[test]
    fn an_algorithm_that_does_not_fit_the_key_is_refused() {
        let ec = Signer::ec();
        let rsa = Signer::rsa();
        let set = Signer::set(&[&ec, &rsa]);
        // RS256 header naming the EC key, signed with the RSA key.
        let t = rsa.sign_with_header(&json!({"alg": "RS256", "kid": EC_KID}), &claims());
        assert_eq!(
            verify(&t, &set, &rules(), NOW).unwrap_err(),
            JwtError::AlgorithmMismatch
        );
        let t = ec.sign_with_header(&json!({"alg": "ES256", "kid": RSA_KID}), &claims());
        assert_eq!(
            verify(&t, &set, &rules(), NOW).unwrap_err(),
            JwtError::AlgorithmMismatch
        );
    }

    #[test]
    fn tampered_payloads_and_signatures_are_refused() {
        for s in [Signer::ec(), Signer::rsa()] {
            let set = Signer::set(&[&s]);
            let t = s.sign(&claims());
            let (head, sig) = t.rsplit_once('.').unwrap();
            let (h, _) = head.split_once('.').unwrap();
            let mut other = claims();
            other["sub"] = json!("admin");
            let forged = format!("{h}.{}.{sig}", b64(&serde_json::to_vec(&other).unwrap()));
            assert_eq!(
                verify(&forged, &set, &rules(), NOW).unwrap_err(),
                JwtError::BadSignature
            );
            let mut raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(sig)
                .unwrap();
            raw[5] ^= 1;
            let flipped = format!("{head}.{}", b64(&raw));
            assert_eq!(
                verify(&flipped, &set, &rules(), NOW).unwrap_err(),
                JwtError::BadSignature
            );
            let short = format!("{head}.{}", b64(&raw[..10]));
            assert_eq!(
                verify(&short, &set, &rules(), NOW).unwrap_err(),
                JwtError::BadSignature
            );
        }
    }

    #[test]
    fn malformed_tokens_say_so_without_echoing_the_token() {
        let ec = Signer::ec();
        let set = Signer::set(&[&ec]);
        let good = ec.sign(&claims());
        let cases = [
            String::new(),
            "abc".to_owned(),
            "a.b".to_owned(),
            format!("{good}.x"),
            format!("!!.{}", good.split_once('.').unwrap().1),
            format!("{}.e30.sig", b64(b"[1]")),
            format!("{}.e30.sig", b64(br#"{"alg":"ES256","alg":"none"}"#)),
            "x".repeat(MAX_TOKEN_LEN + 1),
        ];
        for t in &cases {
            let e = verify(t, &set, &rules(), NOW).unwrap_err();
            assert!(matches!(e, JwtError::Malformed(_)), "{t:?}: {e:?}");
            if t.len() > 3 {
                assert!(!e.to_string().contains(t.as_str()));
            }
        }
        // A payload that is JSON but not an object, properly signed.
        let t = ec.sign(&json!([1, 2]));
        assert_eq!(
            verify(&t, &set, &rules(), NOW).unwrap_err(),
            JwtError::Malformed("payload is not a JSON object")
        );
        // Padding is not base64url-without-padding.
        let padded = format!("{good}=");
        assert!(matches!(
            verify(&padded, &set, &rules(), NOW).unwrap_err(),
            JwtError::Malformed(_)
        ));
        let crit = ec.sign_with_header(
            &json!({"alg": "ES256", "kid": EC_KID, "crit": ["b64"], "b64": false}),
            &claims(),
        );
        assert_eq!(
            verify(&crit, &set, &rules(), NOW).unwrap_err(),
            JwtError::UnsupportedCritical
        );
    }

    #[test]
    fn expiry_not_before_issued_at_and_leeway() {
        let ec = Signer::ec();
        let set = Signer::set(&[&ec]);
        let exp = ec.sign(&json!({"exp": NOW}));
        assert_eq!(
            verify(&exp, &set, &rules(), NOW).unwrap_err(),
            JwtError::Expired
        );
        assert!(verify(&exp, &set, &rules(), NOW - 1).is_ok());
        let lenient = Validation {
            leeway_secs: 30,
            ..rules()
        };
        assert!(verify(&exp, &set, &lenient, NOW + 29).is_ok());
        assert_eq!(
            verify(&exp, &set, &lenient, NOW + 30).unwrap_err(),
            JwtError::Expired
        );

        let nbf = ec.sign(&json!({"exp": NOW + 100, "nbf": NOW + 10}));
        assert_eq!(
            verify(&nbf, &set, &rules(), NOW).unwrap_err(),
            JwtError::NotYetValid
        );
        assert!(verify(&nbf, &set, &rules(), NOW + 10).is_ok());
        assert!(verify(&nbf, &set, &lenient, NOW).is_ok());

        let iat = ec.sign(&json!({"exp": NOW + 100, "iat": NOW + 10}));
        assert_eq!(
            verify(&iat, &set, &rules(), NOW).unwrap_err(),
            JwtError::IssuedInFuture
        );
        assert!(verify(&iat, &set, &lenient, NOW).is_ok());

        let fractional = ec.sign(&json!({"exp": (NOW as f64) + 0.9}));
        assert_eq!(
            verify(&fractional, &set, &rules(), NOW).unwrap_err(),
            JwtError::Expired
        );
        let stringy = ec.sign(&json!({"exp": "1800000060"}));
        assert_eq!(
            verify(&stringy, &set, &rules(), NOW).unwrap_err(),
            JwtError::InvalidClaim("exp")
        );
        let huge = ec.sign(&json!({"exp": u64::MAX}));
        assert!(verify(&huge, &set, &rules(), NOW).is_ok());
    }

    #[test]
    fn exp_is_required_unless_the_rules_say_otherwise() {
        let ec = Signer::ec();
        let set = Signer::set(&[&ec]);
        let t = ec.sign(&json!({"sub": "u"}));
        assert_eq!(
            verify(&t, &set, &rules(), NOW).unwrap_err(),
            JwtError::MissingClaim("exp")
        );
        let lax = Validation {
            require_exp: false,
            ..rules()
        };
        assert_eq!(verify_until(&t, &set, &lax, NOW).unwrap().1, u64::MAX);
    }

    #[test]
    fn audience_as_string_or_array() {
        let ec = Signer::ec();
        let set = Signer::set(&[&ec]);
        let want = Validation {
            audiences: vec!["sluice".into(), "other".into()],
            ..rules()
        };
        let one = ec.sign(&json!({"exp": NOW + 9, "aud": "sluice"}));
        let list = ec.sign(&json!({"exp": NOW + 9, "aud": ["x", "other"]}));
        let wrong = ec.sign(&json!({"exp": NOW + 9, "aud": ["x", "y"]}));
        let wrong_one = ec.sign(&json!({"exp": NOW + 9, "aud": "x"}));
        let missing = ec.sign(&json!({"exp": NOW + 9}));
        let bad = ec.sign(&json!({"exp": NOW + 9, "aud": ["sluice", 3]}));
        assert!(verify(&one, &set, &want, NOW).is_ok());
        assert!(verify(&list, &set, &want, NOW).is_ok());
        assert_eq!(
            verify(&wrong, &set, &want, NOW).unwrap_err(),
            JwtError::WrongAudience
        );
        assert_eq!(
            verify(&wrong_one, &set, &want, NOW).unwrap_err(),
            JwtError::WrongAudience
        );
        assert_eq!(
            verify(&missing, &set, &want, NOW).unwrap_err(),
            JwtError::MissingClaim("aud")
        );
        assert_eq!(
            verify(&bad, &set, &want, NOW).unwrap_err(),
            JwtError::InvalidClaim("aud")
        );
        // No audience configured: not checked.
        assert!(verify(&wrong, &set, &rules(), NOW).is_ok());
    }

    #[test]
    fn issuer_must_match_when_configured() {
        let ec = Signer::ec();
        let set = Signer::set(&[&ec]);
        let want = Validation {
            issuer: Some("https://idp".into()),
            ..rules()
        };
        assert!(verify(&ec.sign(&claims()), &set, &want, NOW).is_ok());
        let other = ec.sign(&json!({"exp": NOW + 9, "iss": "https://evil"}));
        assert_eq!(
            verify(&other, &set, &want, NOW).unwrap_err(),
            JwtError::WrongIssuer
        );
        let missing = ec.sign(&json!({"exp": NOW + 9}));
        assert_eq!(
            verify(&missing, &set, &want, NOW).unwrap_err(),
            JwtError::MissingClaim("iss")
        );
        let number = ec.sign(&json!({"exp": NOW + 9, "iss": 7}));
        assert_eq!(
            verify(&number, &set, &want, NOW).unwrap_err(),
            JwtError::InvalidClaim("iss")
        );
    }

    #[test]
    fn kid_selection_unknown_and_absent() {
        let ec = Signer::ec();
        let rsa = Signer::rsa();
        let both = Signer::set(&[&ec, &rsa]);
        let only_ec = Signer::set(&[&ec]);
        let t = rsa.sign(&claims());
        assert_eq!(
            verify(&t, &only_ec, &rules(), NOW).unwrap_err(),
            JwtError::UnknownKid
        );
        let no_kid = ec.sign_with_header(&json!({"alg": "ES256"}), &claims());
        assert!(verify(&no_kid, &only_ec, &rules(), NOW).is_ok());
        assert_eq!(
            verify(&no_kid, &both, &rules(), NOW).unwrap_err(),
            JwtError::KidRequired
        );
        // A token naming a kid the single key does not carry is refused, as LiteLLM does.
        let named = ec.sign_with_header(&json!({"alg": "ES256", "kid": "other"}), &claims());
        assert_eq!(
            verify(&named, &only_ec, &rules(), NOW).unwrap_err(),
            JwtError::UnknownKid
        );
    }

    #[test]
    fn an_id_jag_is_not_a_bearer_token() {
        let ec = Signer::ec();
        let set = Signer::set(&[&ec]);
        for typ in ["oauth-id-jag+jwt", "application/OAuth-ID-JAG+JWT"] {
            let t = ec.sign_with_header(
                &json!({"alg": "ES256", "kid": EC_KID, "typ": typ}),
                &claims(),
            );
            assert_eq!(
                verify(&t, &set, &rules(), NOW).unwrap_err(),
                JwtError::NotABearerToken
            );
        }
        let t = ec.sign_with_header(
            &json!({"alg": "ES256", "kid": EC_KID, "typ": "at+jwt"}),
            &claims(),
        );
        assert!(verify(&t, &set, &rules(), NOW).is_ok());
    }

    #[test]
    fn keys_embedded_in_the_header_are_ignored() {
        let ec = Signer::ec();
        let attacker = Signer::ec();
        let set = Signer::set(&[&ec]);
        let jwk = attacker.jwk();
        let t = attacker.sign_with_header(
            &json!({"alg": "ES256", "kid": EC_KID, "jwk": jwk, "jku": "https://evil/jwks"}),
            &claims(),
        );
        assert_eq!(
            verify(&t, &set, &rules(), NOW).unwrap_err(),
            JwtError::BadSignature
        );
    }

    #[test]
    fn p384_and_ed25519_keys_verify_too() {
        let p384 = Signer::p384();
        let ed = Signer::ed25519();
        let set = Signer::set(&[&p384, &ed]);
        assert!(verify(&p384.sign(&claims()), &set, &rules(), NOW).is_ok());
        assert!(verify(&ed.sign(&claims()), &set, &rules(), NOW).is_ok());
    }
}
