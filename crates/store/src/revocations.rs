//! Console sessions signed out before their expiry (`console_revocations`): the console's
//! session cookie is a signed token every instance accepts, so a sign-out is remembered here,
//! shared by the fleet, until the token would have expired anyway. Rows are pruned as new ones
//! come.

use time::OffsetDateTime;

use super::{to_ms, Store, StoreError};

impl Store {
    /// Remember that the session whose token digests to `digest` (hex) ended, until
    /// `expires_at`, when the token stops being accepted anyway. Expired rows go at the same
    /// time.
    pub async fn revoke_session(
        &self,
        digest: &str,
        expires_at: OffsetDateTime,
        now: OffsetDateTime,
    ) -> Result<(), StoreError> {
        let mut tx = self.pool().begin().await?;
        sqlx::query("DELETE FROM console_revocations WHERE expires_at < $1")
            .bind(to_ms(now))
            .execute(&mut *tx)
            .await?;
        sqlx::query(
            "INSERT INTO console_revocations (digest, expires_at) VALUES ($1, $2) \
             ON CONFLICT (digest) DO NOTHING",
        )
        .bind(digest.to_owned())
        .bind(to_ms(expires_at))
        .execute(&mut *tx)
        .await?;
        tx.commit().await?;
        Ok(())
    }

    /// Whether the session whose token digests to `digest` was signed out.
    pub async fn session_revoked(&self, digest: &str) -> Result<bool, StoreError> {
        let row = sqlx::query("SELECT 1 AS one FROM console_revocations WHERE digest = $1")
            .bind(digest.to_owned())
            .fetch_optional(self.pool())
            .await?;
        Ok(row.is_some())
    }
}

#[cfg(test)]
mod tests {
    use time::macros::datetime;

    use crate::testing::every_backend;

    #[tokio::test]
    async fn a_revoked_session_is_remembered_until_it_would_expire() {
        let now = datetime!(2026-11-30 10:00 UTC);
        for db in every_backend().await {
            let s = &db.store;
            assert!(!s.session_revoked("d1").await.unwrap());
            s.revoke_session("d1", datetime!(2026-11-30 12:00 UTC), now)
                .await
                .unwrap();
            s.revoke_session("d1", datetime!(2026-11-30 12:00 UTC), now)
                .await
                .unwrap();
            assert!(s.session_revoked("d1").await.unwrap());
            assert!(!s.session_revoked("d2").await.unwrap());
            // Past its expiry, the next sign-out prunes it.
            s.revoke_session(
                "d2",
                datetime!(2026-11-30 23:00 UTC),
                datetime!(2026-11-30 13:00 UTC),
            )
            .await
            .unwrap();
            assert!(!s.session_revoked("d1").await.unwrap());
            assert!(s.session_revoked("d2").await.unwrap());
        }
    }
}
