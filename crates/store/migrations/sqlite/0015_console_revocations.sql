-- Console sessions signed out before they expired: the session cookie is a signed token, so
-- signing out must be remembered server-side, by every instance, until the token would have
-- expired anyway. `digest` is the SHA-256 (hex) of the token, never the token itself.
CREATE TABLE console_revocations (
    digest     TEXT PRIMARY KEY,
    expires_at INTEGER NOT NULL
);
CREATE INDEX console_revocations_expiry ON console_revocations (expires_at);
