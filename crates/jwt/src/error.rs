//! Why a token or a key set was refused. Every message is safe to send to a client: none
//! carries any part of the token, and the few details they hold are sluice's own words.

use crate::alg::AlgRefusal;
use crate::jwks::SkippedKey;

/// Why a bearer token was refused, one variant per cause, so the gateway can log the cause,
/// pick the status (see [`JwtError::is_unavailable`]) and decide on a key refresh
/// ([`JwtError::UnknownKid`]) without reading strings.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwtError {
    /// Not a compact JWS: wrong number of segments, bad base64url, a header or payload that is
    /// not a JSON object, or longer than [`crate::MAX_TOKEN_LEN`]. The detail is a fixed phrase.
    #[error("malformed token: {0}")]
    Malformed(&'static str),
    /// The header's `alg` is `none`, HMAC, or not one sluice verifies.
    #[error("{}", refusal_message(.0))]
    UnsupportedAlgorithm(AlgRefusal),
    /// The header lists `crit` extensions; sluice understands none, and RFC 7515 §4.1.11 says
    /// such a token must be refused.
    #[error("token header has critical extensions this gateway does not understand")]
    UnsupportedCritical,
    /// The header's `typ` says ID-JAG (`oauth-id-jag+jwt`): a grant to redeem at a token
    /// endpoint, signed by the same IdP, which must not pass as an API bearer token.
    #[error("an ID-JAG is an authorization grant, not a bearer token")]
    NotABearerToken,
    /// The key the token names exists but is of another type, or declares another `alg`.
    #[error("token algorithm does not match its signing key")]
    AlgorithmMismatch,
    /// No key in the current set has the token's `kid` (or the set's only key has a `kid` the
    /// token does not name). A key rotation at the IdP looks like this, so the gateway may
    /// refresh the set, rate-limited by [`crate::Keys::claim_unknown_kid_refresh`].
    #[error("token signing key is not known")]
    UnknownKid,
    /// The token names no `kid` and the set holds several keys, so there is no key to pick.
    #[error("token names no signing key (kid) and several keys are configured")]
    KidRequired,
    /// The signature does not verify under the selected key.
    #[error("token signature is invalid")]
    BadSignature,
    /// A registered claim sluice checks is absent (`exp` when required, `aud` when an audience
    /// is configured, `iss` when an issuer is).
    #[error("token has no `{0}` claim")]
    MissingClaim(&'static str),
    /// A registered claim has the wrong JSON type (a date that is not a number, an `aud` that is
    /// neither a string nor an array of strings, an `iss` that is not a string).
    #[error("token claim `{0}` has an invalid format")]
    InvalidClaim(&'static str),
    /// `exp` has passed (beyond the leeway).
    #[error("token has expired")]
    Expired,
    /// `nbf` is still in the future (beyond the leeway).
    #[error("token is not valid yet")]
    NotYetValid,
    /// `iat` is in the future (beyond the leeway): a clock problem at the issuer, or a forgery.
    #[error("token was issued in the future")]
    IssuedInFuture,
    /// `aud` does not name any configured audience.
    #[error("token audience is not accepted")]
    WrongAudience,
    /// `iss` is not the configured issuer.
    #[error("token issuer is not accepted")]
    WrongIssuer,
    /// No key set has been installed yet (the first fetch has not succeeded).
    #[error("token signing keys are not available")]
    NoKeys,
    /// The key set is older than `public_key_ttl + public_key_stale_ttl`: refreshes have failed
    /// for that long, so sluice fails closed rather than trust keys the IdP may have revoked.
    #[error("token signing keys are not available")]
    KeysStale,
}

fn refusal_message(r: &AlgRefusal) -> &'static str {
    match r {
        AlgRefusal::Unsigned => "unsigned tokens (alg none) are not accepted",
        AlgRefusal::Symmetric => "HMAC-signed tokens (HS256/HS384/HS512) are not accepted",
        AlgRefusal::Unknown => "token algorithm is not supported",
    }
}

impl JwtError {
    /// True when the gateway, not the token, is at fault (no keys yet, or keys too stale): the
    /// answer is a 503 like LiteLLM's JWKS-unavailable error, not a 401.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, Self::NoKeys | Self::KeysStale)
    }
}

/// Why a JWK Set could not be installed; the previous set (if any) stays in place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JwksError {
    /// The body is not JSON.
    #[error("the key set is not valid JSON")]
    NotJson,
    /// JSON, but neither `{"keys": [...]}`, a bare array of keys, nor a single key object.
    #[error("the JSON is not a JWK Set (expected {{\"keys\": [...]}})")]
    NotAKeySet,
    /// Every key was skipped (each with its reason), so nothing could verify a token.
    #[error("the key set has no usable signing key ({})", summary(.0))]
    NoUsableKey(Vec<SkippedKey>),
}

fn summary(skipped: &[SkippedKey]) -> String {
    if skipped.is_empty() {
        return "it is empty".to_owned();
    }
    skipped
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}
