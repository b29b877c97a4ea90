//! Tests' signing side: key pairs, their JWKs and tokens signed with them. EC and Ed25519 keys
//! are generated per test; ring cannot generate RSA keys, so RSA uses a fixed 2048-bit test key
//! (`tests/fixtures/rsa2048.pk8.der`, made with `openssl genrsa 2048 | openssl pkcs8 -topk8
//! -nocrypt -outform DER`; it signs nothing but these tests).

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{
    self, EcdsaKeyPair, Ed25519KeyPair, KeyPair as _, RsaKeyPair, RsaPublicKeyComponents,
};
use serde_json::{json, Value};

use crate::jwks::Jwks;

pub(crate) const EC_KID: &str = "ec-1";
pub(crate) const RSA_KID: &str = "rsa-1";

const RSA_PKCS8: &[u8] = include_bytes!("../tests/fixtures/rsa2048.pk8.der");

pub(crate) fn b64(bytes: &[u8]) -> String {
    URL_SAFE_NO_PAD.encode(bytes)
}

enum Pair {
    Ec(EcdsaKeyPair),
    Rsa(RsaKeyPair),
    Ed(Ed25519KeyPair),
}

/// A key pair with its `kid`, default `alg` and public JWK.
pub(crate) struct Signer {
    kid: String,
    alg: &'static str,
    pair: Pair,
    jwk: Value,
    rng: SystemRandom,
}

impl Signer {
    pub(crate) fn ec() -> Self {
        Self::ec_with_kid(EC_KID)
    }

    pub(crate) fn ec_with_kid(kid: &str) -> Self {
        Self::ecdsa(
            kid,
            "ES256",
            "P-256",
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
        )
    }

    pub(crate) fn p384() -> Self {
        Self::ecdsa(
            "p384-1",
            "ES384",
            "P-384",
            &signature::ECDSA_P384_SHA384_FIXED_SIGNING,
        )
    }

    fn ecdsa(
        kid: &str,
        alg: &'static str,
        crv: &str,
        scheme: &'static signature::EcdsaSigningAlgorithm,
    ) -> Self {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(scheme, &rng).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(scheme, pkcs8.as_ref(), &rng).unwrap();
        let point = pair.public_key().as_ref();
        let half = (point.len() - 1) / 2;
        let jwk = json!({
            "kty": "EC", "crv": crv, "kid": kid, "use": "sig", "alg": alg,
            "x": b64(&point[1..1 + half]), "y": b64(&point[1 + half..]),
        });
        Self {
            kid: kid.to_owned(),
            alg,
            pair: Pair::Ec(pair),
            jwk,
            rng,
        }
    }

    pub(crate) fn rsa() -> Self {
        let pair = RsaKeyPair::from_pkcs8(RSA_PKCS8).unwrap();
        let public: RsaPublicKeyComponents<Vec<u8>> = pair.public().into();
        // No `alg` in the JWK: the key then verifies RS* and PS* alike.
        let jwk = json!({
            "kty": "RSA", "kid": RSA_KID, "use": "sig", "n": b64(&public.n), "e": b64(&public.e),
        });
        Self {
            kid: RSA_KID.to_owned(),
            alg: "RS256",
            pair: Pair::Rsa(pair),
            jwk,
            rng: SystemRandom::new(),
        }
    }

    pub(crate) fn ed25519() -> Self {
        let rng = SystemRandom::new();
        let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
        let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
        let jwk = json!({
            "kty": "OKP", "crv": "Ed25519", "kid": "ed-1", "x": b64(pair.public_key().as_ref()),
        });
        Self {
            kid: "ed-1".to_owned(),
            alg: "EdDSA",
            pair: Pair::Ed(pair),
            jwk,
            rng,
        }
    }

    pub(crate) fn jwk(&self) -> Value {
        self.jwk.clone()
    }

    /// A JWK Set body holding these signers' keys.
    pub(crate) fn set_body(signers: &[&Signer]) -> Vec<u8> {
        let keys: Vec<Value> = signers.iter().map(|s| s.jwk()).collect();
        serde_json::to_vec(&json!({ "keys": keys })).unwrap()
    }

    pub(crate) fn set(signers: &[&Signer]) -> Jwks {
        Jwks::parse(&Self::set_body(signers)).unwrap()
    }

    pub(crate) fn sign(&self, claims: &Value) -> String {
        self.sign_as(self.alg, claims)
    }

    pub(crate) fn sign_as(&self, alg: &str, claims: &Value) -> String {
        self.sign_with_header(&json!({"alg": alg, "kid": self.kid, "typ": "JWT"}), claims)
    }

    /// Signs with this key whatever the header says; an RSA key pads as the header's `alg`
    /// asks (PS* for PSS, PKCS#1 v1.5 otherwise).
    pub(crate) fn sign_with_header(&self, header: &Value, claims: &Value) -> String {
        let input = format!(
            "{}.{}",
            b64(&serde_json::to_vec(header).unwrap()),
            b64(&serde_json::to_vec(claims).unwrap())
        );
        let sig = match &self.pair {
            Pair::Ec(p) => p
                .sign(&self.rng, input.as_bytes())
                .unwrap()
                .as_ref()
                .to_vec(),
            Pair::Ed(p) => p.sign(input.as_bytes()).as_ref().to_vec(),
            Pair::Rsa(p) => {
                let padding: &dyn signature::RsaEncoding = match header["alg"].as_str() {
                    Some("PS256") => &signature::RSA_PSS_SHA256,
                    Some("RS384") => &signature::RSA_PKCS1_SHA384,
                    Some("RS512") => &signature::RSA_PKCS1_SHA512,
                    _ => &signature::RSA_PKCS1_SHA256,
                };
                let mut sig = vec![0; p.public().modulus_len()];
                p.sign(padding, &self.rng, input.as_bytes(), &mut sig)
                    .unwrap();
                sig
            }
        };
        format!("{input}.{}", b64(&sig))
    }
}
