//! A JWK Set parsed into verifying keys, once per fetch, so a verification only picks a key
//! and calls ring.
//!
//! Keys sluice cannot use are skipped with a reason (an encryption key, an HMAC `oct` key, a
//! curve ring lacks) rather than failing the whole set: IdPs publish mixed sets, and one odd key
//! must not take JWT auth down. A set with no usable key at all is an error.

use std::fmt;

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::{alphabet, Engine as _};
use ring::signature::{RsaPublicKeyComponents, UnparsedPublicKey};
use serde_json::{Map, Value};

use crate::alg::{Alg, Family};
use crate::error::{JwksError, JwtError};

/// JWK members are base64url; RFC 7517 says without padding, but some IdPs pad, and a key is
/// not attacker input, so both are read.
const JWK_B64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// One verifying key: its `kid`, the `alg` it is pinned to (if the JWK says), and the key
/// material in the form ring takes, decoded once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Jwk {
    kid: Option<Box<str>>,
    alg: Option<Alg>,
    material: Material,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Material {
    /// Modulus and exponent, big-endian without leading zeros (ring refuses leading zeros).
    Rsa { n: Box<[u8]>, e: Box<[u8]> },
    /// `0x04 || x || y`, the uncompressed point ring's ECDSA verifiers parse.
    Ec { family: Family, point: Box<[u8]> },
    /// The 32-byte Ed25519 public key.
    Ed25519(Box<[u8]>),
}

impl Jwk {
    /// The key's id, which tokens name in their header to pick it.
    pub fn kid(&self) -> Option<&str> {
        self.kid.as_deref()
    }

    /// The algorithm the JWK pins the key to, when it says (`alg`); a token must then use it.
    pub fn alg(&self) -> Option<Alg> {
        self.alg
    }

    /// The key's type, for logs and for refusing algorithm confusion.
    pub fn family(&self) -> Family {
        match &self.material {
            Material::Rsa { .. } => Family::Rsa,
            Material::Ec { family, .. } => *family,
            Material::Ed25519(_) => Family::Ed25519,
        }
    }

    /// Whether a token with `alg` may be verified by this key: same family, and the JWK's own
    /// `alg` (if any) equal to it.
    pub fn accepts(&self, alg: Alg) -> bool {
        alg.family() == self.family() && self.alg.is_none_or(|a| a == alg)
    }

    /// Checks `signature` over `message` with ring. The caller has already checked
    /// [`Jwk::accepts`]; a mismatch here still fails closed.
    pub(crate) fn verify(
        &self,
        alg: Alg,
        message: &[u8],
        signature: &[u8],
    ) -> Result<(), JwtError> {
        if !self.accepts(alg) {
            return Err(JwtError::AlgorithmMismatch);
        }
        let ok = match (&self.material, alg.rsa_params(), alg.point_verifier()) {
            (Material::Rsa { n, e }, Some(params), _) => RsaPublicKeyComponents {
                n: &n[..],
                e: &e[..],
            }
            .verify(params, message, signature)
            .is_ok(),
            (Material::Ec { point, .. }, _, Some(v)) | (Material::Ed25519(point), _, Some(v)) => {
                UnparsedPublicKey::new(v, &point[..])
                    .verify(message, signature)
                    .is_ok()
            }
            _ => return Err(JwtError::AlgorithmMismatch),
        };
        if ok {
            Ok(())
        } else {
            Err(JwtError::BadSignature)
        }
    }

    fn parse(v: &Value) -> Result<Self, SkipReason> {
        let obj = v.as_object().ok_or(SkipReason::NotAnObject)?;
        if let Some(u) = obj.get("use") {
            if u.as_str() != Some("sig") {
                return Err(SkipReason::NotForSignatures);
            }
        }
        if let Some(ops) = obj.get("key_ops") {
            let verifies = ops
                .as_array()
                .is_some_and(|a| a.iter().any(|o| o.as_str() == Some("verify")));
            if !verifies {
                return Err(SkipReason::NotForSignatures);
            }
        }
        let alg = match obj.get("alg") {
            None => None,
            Some(a) => Some(
                a.as_str()
                    .and_then(|a| Alg::from_name(a).ok())
                    .ok_or(SkipReason::UnsupportedAlg)?,
            ),
        };
        let kid = match obj.get("kid") {
            None => None,
            Some(k) => Some(Box::from(k.as_str().ok_or(SkipReason::BadMaterial("kid"))?)),
        };
        let material = match obj.get("kty").and_then(Value::as_str) {
            Some("RSA") => rsa(obj)?,
            Some("EC") => ec(obj)?,
            Some("OKP") => okp(obj)?,
            _ => return Err(SkipReason::UnsupportedKeyType),
        };
        let key = Self { kid, alg, material };
        if let Some(a) = alg {
            if a.family() != key.family() {
                return Err(SkipReason::UnsupportedAlg);
            }
        }
        Ok(key)
    }
}

fn member(obj: &Map<String, Value>, name: &'static str) -> Result<Vec<u8>, SkipReason> {
    let s = obj
        .get(name)
        .and_then(Value::as_str)
        .ok_or(SkipReason::BadMaterial(name))?;
    JWK_B64.decode(s).map_err(|_| SkipReason::BadMaterial(name))
}

fn strip_zeros(b: &[u8]) -> &[u8] {
    let first = b.iter().position(|&x| x != 0).unwrap_or(b.len());
    &b[first..]
}

fn rsa(obj: &Map<String, Value>) -> Result<Material, SkipReason> {
    let n = member(obj, "n")?;
    let e = member(obj, "e")?;
    let n = strip_zeros(&n);
    let e = strip_zeros(&e);
    let bits = match n.first() {
        Some(&top) => (n.len() - 1) * 8 + (8 - top.leading_zeros() as usize),
        None => 0,
    };
    if !(2048..=8192).contains(&bits) {
        return Err(SkipReason::RsaKeySize(bits));
    }
    // ring takes exponents from 3 up to 33 bits; anything else is a broken key.
    let odd = e.last().is_some_and(|b| b & 1 == 1);
    if e.is_empty() || e.len() > 4 || !odd || (e.len() == 1 && e[0] < 3) {
        return Err(SkipReason::BadMaterial("e"));
    }
    Ok(Material::Rsa {
        n: n.into(),
        e: e.into(),
    })
}

fn ec(obj: &Map<String, Value>) -> Result<Material, SkipReason> {
    let (family, len) = match obj.get("crv").and_then(Value::as_str) {
        Some("P-256") => (Family::P256, 32),
        Some("P-384") => (Family::P384, 48),
        _ => return Err(SkipReason::UnsupportedCurve),
    };
    let x = member(obj, "x")?;
    let y = member(obj, "y")?;
    if x.len() != len {
        return Err(SkipReason::BadMaterial("x"));
    }
    if y.len() != len {
        return Err(SkipReason::BadMaterial("y"));
    }
    let mut point = Vec::with_capacity(1 + 2 * len);
    point.push(0x04);
    point.extend_from_slice(&x);
    point.extend_from_slice(&y);
    Ok(Material::Ec {
        family,
        point: point.into(),
    })
}

fn okp(obj: &Map<String, Value>) -> Result<Material, SkipReason> {
    if obj.get("crv").and_then(Value::as_str) != Some("Ed25519") {
        return Err(SkipReason::UnsupportedCurve);
    }
    let x = member(obj, "x")?;
    if x.len() != 32 {
        return Err(SkipReason::BadMaterial("x"));
    }
    Ok(Material::Ed25519(x.into()))
}

/// Why one key of a set was left out, so the gateway can log it once per fetch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SkipReason {
    /// The entry is not a JSON object.
    NotAnObject,
    /// `use` is not `sig`, or `key_ops` lacks `verify` (an encryption key).
    NotForSignatures,
    /// `kty` is missing or not `RSA`, `EC` or `OKP` (`oct`, HMAC, is refused on purpose).
    UnsupportedKeyType,
    /// `crv` is not `P-256`, `P-384` or `Ed25519` (P-521 and Ed448: ring lacks them).
    UnsupportedCurve,
    /// The JWK's `alg` is not one sluice verifies, or does not fit the key's type.
    UnsupportedAlg,
    /// An RSA modulus outside 2048..=8192 bits (ring's bounds; shorter keys are breakable).
    RsaKeySize(usize),
    /// A member is missing, not base64url, or the wrong length; names the member.
    BadMaterial(&'static str),
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotAnObject => f.write_str("not a JSON object"),
            Self::NotForSignatures => f.write_str("not a signature key (use/key_ops)"),
            Self::UnsupportedKeyType => f.write_str("unsupported kty (RSA, EC, OKP are)"),
            Self::UnsupportedCurve => f.write_str("unsupported crv (P-256, P-384, Ed25519 are)"),
            Self::UnsupportedAlg => f.write_str("unsupported or mismatched alg"),
            Self::RsaKeySize(bits) => write!(f, "RSA modulus of {bits} bits (2048..=8192 are)"),
            Self::BadMaterial(m) => write!(f, "member `{m}` missing or invalid"),
        }
    }
}

/// A key left out of a set: its position, its `kid` if it had a readable one, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SkippedKey {
    /// Position in the set, for keys without a `kid`.
    pub index: usize,
    /// The key's `kid`, when it was a string.
    pub kid: Option<String>,
    /// Why it was skipped.
    pub reason: SkipReason,
}

impl fmt::Display for SkippedKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kid {
            Some(k) => write!(f, "key {} (kid {k:?}): {}", self.index, self.reason),
            None => write!(f, "key {}: {}", self.index, self.reason),
        }
    }
}

/// The usable keys of one fetched JWK Set, ready for verification.
#[derive(Clone, Debug)]
pub struct Jwks {
    keys: Vec<Jwk>,
    skipped: Vec<SkippedKey>,
}

impl Jwks {
    /// Parses a fetched body: `{"keys": [...]}` (RFC 7517), and, as LiteLLM reads a JWKS URL's
    /// answer, a bare array of keys or a single key object.
    pub fn parse(body: &[u8]) -> Result<Self, JwksError> {
        let v: Value = serde_json::from_slice(body).map_err(|_| JwksError::NotJson)?;
        let entries: Vec<Value> = match v {
            Value::Object(mut o) => match o.remove("keys") {
                Some(Value::Array(a)) => a,
                Some(_) => return Err(JwksError::NotAKeySet),
                None if o.contains_key("kty") => vec![Value::Object(o)],
                None => return Err(JwksError::NotAKeySet),
            },
            Value::Array(a) => a,
            _ => return Err(JwksError::NotAKeySet),
        };
        let mut keys = Vec::with_capacity(entries.len());
        let mut skipped = Vec::new();
        for (index, entry) in entries.iter().enumerate() {
            match Jwk::parse(entry) {
                Ok(k) => keys.push(k),
                Err(reason) => skipped.push(SkippedKey {
                    index,
                    kid: entry.get("kid").and_then(Value::as_str).map(str::to_owned),
                    reason,
                }),
            }
        }
        if keys.is_empty() {
            return Err(JwksError::NoUsableKey(skipped));
        }
        Ok(Self { keys, skipped })
    }

    /// Appends another fetched set's keys after this one's: LiteLLM's `JWT_PUBLIC_KEY_URL` may
    /// list several URLs, tried in order, and one [`crate::Keys`] holding their union keeps one
    /// cache and one staleness clock. (A token without `kid` then needs the union to hold a
    /// single key, where LiteLLM would take the first URL's only key.)
    pub fn extend(&mut self, other: Jwks) {
        let offset = self.keys.len() + self.skipped.len();
        self.keys.extend(other.keys);
        self.skipped
            .extend(other.skipped.into_iter().map(|s| SkippedKey {
                index: s.index + offset,
                ..s
            }));
    }

    /// The usable keys, in the set's order.
    pub fn keys(&self) -> &[Jwk] {
        &self.keys
    }

    /// The keys left out and why, for a log line after each fetch.
    pub fn skipped(&self) -> &[SkippedKey] {
        &self.skipped
    }

    /// Whether two sets verify exactly the same tokens (same keys, any order): a refresh that
    /// brings the same keys keeps the verified-token cache.
    pub fn same_keys(&self, other: &Self) -> bool {
        self.keys.len() == other.keys.len() && self.keys.iter().all(|k| other.keys.contains(k))
    }

    /// Picks the key for a token's `kid` and `alg`. With a `kid`, among the keys carrying it the
    /// first that accepts `alg`; without one, the set's only key (as LiteLLM does), never a
    /// guess among several.
    pub fn select(&self, kid: Option<&str>, alg: Alg) -> Result<&Jwk, JwtError> {
        match kid {
            Some(kid) => {
                let mut named = self.keys.iter().filter(|k| k.kid() == Some(kid)).peekable();
                if named.peek().is_none() {
                    return Err(JwtError::UnknownKid);
                }
                named
                    .find(|k| k.accepts(alg))
                    .ok_or(JwtError::AlgorithmMismatch)
            }
            None => match self.keys.as_slice() {
                [only] if only.accepts(alg) => Ok(only),
                [_] => Err(JwtError::AlgorithmMismatch),
                _ => Err(JwtError::KidRequired),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EC_KEY: &str = r#"{"kty":"EC","crv":"P-256","kid":"ec1","use":"sig",
        "x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
        "y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}"#;

    fn rsa_jwk(bits: usize) -> String {
        let mut n = vec![0xffu8; bits / 8];
        n[0] = 0xc0;
        format!(
            r#"{{"kty":"RSA","kid":"r","n":"{}","e":"AQAB"}}"#,
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(n)
        )
    }

    #[test]
    fn reads_the_three_shapes_lite_llm_reads() {
        let set = Jwks::parse(format!(r#"{{"keys":[{EC_KEY}]}}"#).as_bytes()).unwrap();
        assert_eq!(set.keys().len(), 1);
        assert_eq!(set.keys()[0].kid(), Some("ec1"));
        assert_eq!(set.keys()[0].family(), Family::P256);
        assert_eq!(
            Jwks::parse(format!("[{EC_KEY}]").as_bytes())
                .unwrap()
                .keys()
                .len(),
            1
        );
        assert_eq!(Jwks::parse(EC_KEY.as_bytes()).unwrap().keys().len(), 1);
        assert_eq!(
            Jwks::parse(b"{\"keys\":{}}").unwrap_err(),
            JwksError::NotAKeySet
        );
        assert_eq!(
            Jwks::parse(b"{\"x\":1}").unwrap_err(),
            JwksError::NotAKeySet
        );
        assert_eq!(Jwks::parse(b"not json").unwrap_err(), JwksError::NotJson);
    }

    #[test]
    fn skips_unusable_keys_and_keeps_the_rest() {
        let body = format!(
            r#"{{"keys":[
                {{"kty":"oct","kid":"h","k":"c2VjcmV0"}},
                {{"kty":"RSA","kid":"enc","use":"enc","n":"AQAB","e":"AQAB"}},
                {{"kty":"EC","kid":"p521","crv":"P-521","x":"AA","y":"AA"}},
                {{"kty":"EC","kid":"short","crv":"P-256","x":"AAAA","y":"AAAA"}},
                {{"kty":"OKP","kid":"ed448","crv":"Ed448","x":"AA"}},
                {{"kty":"EC","kid":"ops","crv":"P-256","key_ops":["encrypt"],"x":"AA","y":"AA"}},
                {{"kty":"EC","kid":"wrongalg","alg":"RS256","crv":"P-256",
                  "x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU",
                  "y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}},
                {},
                "junk",
                {EC_KEY}
            ]}}"#,
            rsa_jwk(1024)
        );
        let set = Jwks::parse(body.as_bytes()).unwrap();
        assert_eq!(set.keys().len(), 1);
        let reasons: Vec<_> = set.skipped().iter().map(|s| s.reason.clone()).collect();
        assert_eq!(
            reasons,
            vec![
                SkipReason::UnsupportedKeyType,
                SkipReason::NotForSignatures,
                SkipReason::UnsupportedCurve,
                SkipReason::BadMaterial("x"),
                SkipReason::UnsupportedCurve,
                SkipReason::NotForSignatures,
                SkipReason::UnsupportedAlg,
                SkipReason::RsaKeySize(1024),
                SkipReason::NotAnObject,
            ]
        );
        assert_eq!(set.skipped()[0].kid.as_deref(), Some("h"));
    }

    #[test]
    fn a_set_without_a_usable_key_is_an_error_that_says_why() {
        let err = Jwks::parse(br#"{"keys":[{"kty":"oct","kid":"h","k":"c2VjcmV0"}]}"#).unwrap_err();
        let JwksError::NoUsableKey(ref skipped) = err else {
            panic!("{err:?}")
        };
        assert_eq!(skipped.len(), 1);
        assert!(err.to_string().contains("unsupported kty"), "{err}");
        assert!(Jwks::parse(br#"{"keys":[]}"#)
            .unwrap_err()
            .to_string()
            .contains("empty"));
    }

    #[test]
    fn rsa_moduli_are_bounded_and_leading_zeros_stripped() {
        assert!(Jwks::parse(rsa_jwk(2048).as_bytes()).is_ok());
        assert!(Jwks::parse(rsa_jwk(8192).as_bytes()).is_ok());
        assert!(Jwks::parse(rsa_jwk(8200).as_bytes()).is_err());
        let mut n = vec![0u8];
        n.extend(vec![0xffu8; 256]);
        let padded = format!(
            r#"{{"kty":"RSA","n":"{}","e":"AQAB"}}"#,
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(n)
        );
        let set = Jwks::parse(padded.as_bytes()).unwrap();
        let Material::Rsa { n, .. } = &set.keys()[0].material else {
            panic!()
        };
        assert_eq!(n.len(), 256);
        let even_e = r#"{"kty":"RSA","n":"AQAB","e":"AAI"}"#.replace("AQAB", &{
            base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(vec![0xffu8; 256])
        });
        assert!(Jwks::parse(even_e.as_bytes()).is_err());
    }

    #[test]
    fn selection_by_kid_and_alg() {
        let set =
            Jwks::parse(format!(r#"{{"keys":[{EC_KEY},{}]}}"#, rsa_jwk(2048)).as_bytes()).unwrap();
        assert_eq!(
            set.select(Some("ec1"), Alg::Es256).unwrap().kid(),
            Some("ec1")
        );
        assert_eq!(set.select(Some("r"), Alg::Ps256).unwrap().kid(), Some("r"));
        assert_eq!(
            set.select(Some("ec1"), Alg::Rs256).unwrap_err(),
            JwtError::AlgorithmMismatch
        );
        assert_eq!(
            set.select(Some("r"), Alg::Es256).unwrap_err(),
            JwtError::AlgorithmMismatch
        );
        assert_eq!(
            set.select(Some("zz"), Alg::Es256).unwrap_err(),
            JwtError::UnknownKid
        );
        assert_eq!(
            set.select(None, Alg::Es256).unwrap_err(),
            JwtError::KidRequired
        );
        let one = Jwks::parse(EC_KEY.as_bytes()).unwrap();
        assert!(one.select(None, Alg::Es256).is_ok());
        assert_eq!(
            one.select(None, Alg::Es384).unwrap_err(),
            JwtError::AlgorithmMismatch
        );
    }

    #[test]
    fn a_jwk_alg_pins_the_key() {
        let pinned = rsa_jwk(2048).replace(r#""kty""#, r#""alg":"RS256","kty""#);
        let set = Jwks::parse(pinned.as_bytes()).unwrap();
        assert!(set.select(Some("r"), Alg::Rs256).is_ok());
        assert_eq!(
            set.select(Some("r"), Alg::Ps256).unwrap_err(),
            JwtError::AlgorithmMismatch
        );
    }

    #[test]
    fn sets_from_several_urls_combine_in_order() {
        let mut a = Jwks::parse(EC_KEY.as_bytes()).unwrap();
        let b = Jwks::parse(format!(r#"[{{"kty":"oct"}},{}]"#, rsa_jwk(2048)).as_bytes()).unwrap();
        a.extend(b);
        assert_eq!(a.keys().len(), 2);
        assert_eq!(a.skipped()[0].index, 1);
        assert!(a.select(Some("r"), Alg::Rs256).is_ok());
        assert!(a.select(Some("ec1"), Alg::Es256).is_ok());
    }

    #[test]
    fn same_keys_ignores_order_and_skipped_entries() {
        let a = Jwks::parse(format!(r#"[{EC_KEY},{}]"#, rsa_jwk(2048)).as_bytes()).unwrap();
        let b = Jwks::parse(format!(r#"[{},{{"kty":"oct"}},{EC_KEY}]"#, rsa_jwk(2048)).as_bytes())
            .unwrap();
        let c = Jwks::parse(EC_KEY.as_bytes()).unwrap();
        assert!(a.same_keys(&b));
        assert!(!a.same_keys(&c));
    }
}
