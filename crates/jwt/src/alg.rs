//! The JWS algorithms sluice accepts, and the ones it refuses by name.
//!
//! Only asymmetric algorithms are accepted: the verifying keys come from a public JWK Set, so an
//! HMAC "key" would be public too and anyone could sign with it (the classic RS256 → HS256
//! confusion). `none` is refused for the obvious reason.

use ring::signature::{self, RsaParameters, VerificationAlgorithm};

/// A JWS `alg` sluice verifies; an enum, so a key's family and ring's algorithm are exhaustive
/// matches and an unknown name can never reach a verifier.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Alg {
    /// RSASSA-PKCS1-v1_5 with SHA-256 (the most common IdP default).
    Rs256,
    /// RSASSA-PKCS1-v1_5 with SHA-384.
    Rs384,
    /// RSASSA-PKCS1-v1_5 with SHA-512.
    Rs512,
    /// RSASSA-PSS with SHA-256 (and MGF1 SHA-256).
    Ps256,
    /// RSASSA-PSS with SHA-384.
    Ps384,
    /// RSASSA-PSS with SHA-512.
    Ps512,
    /// ECDSA on P-256 with SHA-256, signature as raw `r || s`.
    Es256,
    /// ECDSA on P-384 with SHA-384, signature as raw `r || s`.
    Es384,
    /// Ed25519 (`EdDSA` with an `OKP` key on `Ed25519`).
    EdDsa,
}

/// Which kind of key an algorithm needs, so a token cannot pick an algorithm that would read an
/// RSA key as an EC one (or the reverse).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Family {
    /// `kty: RSA`, 2048 to 8192 bits.
    Rsa,
    /// `kty: EC`, `crv: P-256`.
    P256,
    /// `kty: EC`, `crv: P-384`.
    P384,
    /// `kty: OKP`, `crv: Ed25519`.
    Ed25519,
}

/// Why a header's `alg` was refused, kept apart so logs and tests can tell an attack
/// (`none`, HMAC) from an IdP using an algorithm sluice lacks (ES512, Ed448).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AlgRefusal {
    /// `alg: none`: an unsigned token.
    Unsigned,
    /// `HS256`/`HS384`/`HS512`: symmetric, and the key set is public.
    Symmetric,
    /// Any other name (ES512, Ed448, typos, JWE algorithms).
    Unknown,
}

impl Alg {
    /// Reads a header's `alg`; names are case-sensitive (RFC 7515 §4.1.1), so `Rs256` or `NONE`
    /// are unknown rather than guessed at.
    pub fn from_name(name: &str) -> Result<Self, AlgRefusal> {
        Ok(match name {
            "RS256" => Self::Rs256,
            "RS384" => Self::Rs384,
            "RS512" => Self::Rs512,
            "PS256" => Self::Ps256,
            "PS384" => Self::Ps384,
            "PS512" => Self::Ps512,
            "ES256" => Self::Es256,
            "ES384" => Self::Es384,
            "EdDSA" => Self::EdDsa,
            "none" => return Err(AlgRefusal::Unsigned),
            n if n.starts_with("HS") => return Err(AlgRefusal::Symmetric),
            _ => return Err(AlgRefusal::Unknown),
        })
    }

    /// The registered name, for logs and for comparing with a JWK's own `alg`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Rs256 => "RS256",
            Self::Rs384 => "RS384",
            Self::Rs512 => "RS512",
            Self::Ps256 => "PS256",
            Self::Ps384 => "PS384",
            Self::Ps512 => "PS512",
            Self::Es256 => "ES256",
            Self::Es384 => "ES384",
            Self::EdDsa => "EdDSA",
        }
    }

    /// The key family this algorithm verifies with.
    pub fn family(self) -> Family {
        match self {
            Self::Rs256 | Self::Rs384 | Self::Rs512 | Self::Ps256 | Self::Ps384 | Self::Ps512 => {
                Family::Rsa
            }
            Self::Es256 => Family::P256,
            Self::Es384 => Family::P384,
            Self::EdDsa => Family::Ed25519,
        }
    }

    /// ring's parameters for an RSA algorithm (`None` for the others): PKCS#1 v1.5 or PSS with
    /// the matching digest, moduli of 2048 to 8192 bits.
    pub(crate) fn rsa_params(self) -> Option<&'static RsaParameters> {
        match self {
            Self::Rs256 => Some(&signature::RSA_PKCS1_2048_8192_SHA256),
            Self::Rs384 => Some(&signature::RSA_PKCS1_2048_8192_SHA384),
            Self::Rs512 => Some(&signature::RSA_PKCS1_2048_8192_SHA512),
            Self::Ps256 => Some(&signature::RSA_PSS_2048_8192_SHA256),
            Self::Ps384 => Some(&signature::RSA_PSS_2048_8192_SHA384),
            Self::Ps512 => Some(&signature::RSA_PSS_2048_8192_SHA512),
            Self::Es256 | Self::Es384 | Self::EdDsa => None,
        }
    }

    /// ring's verifier for a non-RSA algorithm (`None` for RSA): the `_FIXED` ECDSA variants,
    /// because JWS carries ECDSA signatures as raw `r || s`, not DER.
    pub(crate) fn point_verifier(self) -> Option<&'static dyn VerificationAlgorithm> {
        match self {
            Self::Es256 => Some(&signature::ECDSA_P256_SHA256_FIXED),
            Self::Es384 => Some(&signature::ECDSA_P384_SHA384_FIXED),
            Self::EdDsa => Some(&signature::ED25519),
            Self::Rs256 | Self::Rs384 | Self::Rs512 | Self::Ps256 | Self::Ps384 | Self::Ps512 => {
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_refusals_are_named() {
        for alg in [
            Alg::Rs256,
            Alg::Rs384,
            Alg::Rs512,
            Alg::Ps256,
            Alg::Ps384,
            Alg::Ps512,
            Alg::Es256,
            Alg::Es384,
            Alg::EdDsa,
        ] {
            assert_eq!(Alg::from_name(alg.name()), Ok(alg));
        }
        assert_eq!(Alg::from_name("none"), Err(AlgRefusal::Unsigned));
        assert_eq!(Alg::from_name("HS256"), Err(AlgRefusal::Symmetric));
        assert_eq!(Alg::from_name("HS512"), Err(AlgRefusal::Symmetric));
        assert_eq!(Alg::from_name("ES512"), Err(AlgRefusal::Unknown));
        assert_eq!(Alg::from_name("rs256"), Err(AlgRefusal::Unknown));
        assert_eq!(Alg::from_name("NONE"), Err(AlgRefusal::Unknown));
    }
}
